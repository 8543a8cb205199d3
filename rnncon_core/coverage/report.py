"""What a criterion's state says, read without a forward pass (``Criterion.report``): covered
items at any threshold, the per-layer table, the uncovered items, the CLI's summary, where an
item lies, the inputs kept. A criterion whose state is not per-item maxima gives its own
subclass (``report_class``: tknp's patterns)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError


class Report:
    """Views of one criterion's state (see the module docstring)."""

    def __init__(self, crit):
        self.crit = crit

    def covered_mask(self, threshold=None) -> np.ndarray:
        """Per item: covered at the criterion's threshold, or at ``threshold``."""
        return self.crit._state.max_values() > self.crit.cut(threshold)

    def covered_at(self, threshold=None) -> int:
        return int(np.count_nonzero(self.covered_mask(threshold)))

    def by_layer(self, threshold=None, by: str = "layer") -> pd.DataFrame:
        """One row per layer: layer, kind, total, covered, rate. ``by="source"`` groups the
        items by the layer that emits them (``Segment.source_layer``: RConC's Figure 7 rows)."""
        if by not in ("layer", "source"):
            raise InputError(f"by must be 'layer' or 'source', got {by!r}")
        mask = self.covered_mask(threshold)
        rows: dict[str, dict] = {}
        for seg in self.crit.segments:
            key = seg.layer if by == "layer" else seg.source_layer
            kind = seg.kind if by == "layer" else self.layer_kind(key)
            row = rows.setdefault(key, {"layer": key, "kind": kind, "total": 0, "covered": 0})
            row["total"] += seg.size
            row["covered"] += int(np.count_nonzero(mask[seg.offset:seg.offset + seg.size]))
        df = pd.DataFrame(list(rows.values()), columns=["layer", "kind", "total", "covered"])
        df["rate"] = df["covered"] / df["total"].where(df["total"] > 0, 1)
        return df

    def layer_kind(self, name: str) -> str:
        spec = self.crit.tracer.spec.get(name)
        return spec.kind if spec is not None else "input"

    def uncovered(self, layer: str | None = None, threshold=None) -> np.ndarray:
        """Flat indices of items no input has covered yet; layer None, "dense", or a name."""
        crit = self.crit
        mask = ~self.covered_mask(threshold)
        if layer is not None:
            keep = np.zeros(crit.total, bool)
            names = {s.layer for s in crit.segments}
            if layer != "dense" and layer not in names:
                raise InputError(f"no layer {layer!r}; choose one of {', '.join(sorted(names))} "
                                 f"or 'dense'")
            for seg in crit.segments:
                if seg.layer == layer or (layer == "dense" and seg.kind == "dense"):
                    keep[seg.offset:seg.offset + seg.size] = True
            mask &= keep
        return np.flatnonzero(mask)

    def summary(self, threshold=None) -> dict:
        """The CLI's JSON object."""
        crit = self.crit
        config = crit.get_config()
        return {"criterion": crit.name,
                "threshold": crit.cut(threshold) if crit.uses_threshold else None,
                "granularity": config.get("granularity"), "normalize": config.get("normalize"),
                "values": config.get("values"),
                "n_inputs": crit.n_inputs, "total": crit.total,
                "covered": self.covered_at(threshold), "rate": crit.rate(threshold),
                "by_layer": crit.by_layer(threshold).to_dict(orient="records")}

    def segment_of(self, index: int) -> tuple:
        """(the Segment holding flat item ``index``, the item's position in its shape)."""
        crit = self.crit
        if not (0 <= int(index) < crit.total):
            raise InputError(f"index {index} out of range [0, {crit.total})")
        seg = crit.segments[int(np.searchsorted(crit._offsets, index, side="right")) - 1]
        return seg, np.unravel_index(int(index) - seg.offset, seg.shape)

    def stored_input(self, index: int):
        """The index-th input given to update (as validated), and whether it was embedded."""
        return self.crit._inputs.get(index, self.crit.n_inputs)
