"""The reports' shared writer, JSON encoder and versions block (rnncon_core/reports/writer.py)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rnncon_core.io import json_default, to_json, versions
from rnncon_core.reports.writer import write_files


def test_json_encoder_converts_numpy_and_paths_and_refuses_the_rest():
    obj = {"a": np.float32(0.5), "b": np.int64(3), "c": np.arange(3), "d": np.bool_(True),
           "e": Path("/tmp/x"), "f": {2, 1}}
    assert json.loads(to_json(obj)) == {"a": 0.5, "b": 3, "c": [0, 1, 2], "d": True,
                                        "e": "/tmp/x", "f": [1, 2]}
    with pytest.raises(TypeError, match="object"):
        json_default(object())


def test_write_files_by_extension_with_provenance(tmp_path):
    frame = pd.DataFrame({"x": [0.123456, 1.0], "name": ["a", "b"]})
    rows = [{"k": 1, "v": None}, {"k": 2, "v": 0.5}]
    files = write_files(tmp_path / "out", {"t.csv": frame, "rows.csv": rows, "none.csv": [],
                                           "r.json": {"n": np.int32(7)}, "r.md": "# title\n"},
                        report="demo", float_format="%.2f")
    out = tmp_path / "out"
    assert files == [str(out / f) for f in ("t.csv", "rows.csv", "r.json", "r.md",
                                            "provenance.json")]
    assert (out / "t.csv").read_text() == "x,name\n0.12,a\n1.00,b\n"
    assert (out / "rows.csv").read_bytes() == b"k,v\r\n1,\r\n2,0.5\r\n"    # rows as they are
    assert not (out / "none.csv").exists()
    assert json.loads((out / "r.json").read_text()) == {"n": 7}
    assert (out / "r.md").read_text() == "# title\n"
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["report"] == "demo" and prov["versions"] == versions()
    assert prov["versions"]["numpy"] == np.__version__ and "python" in prov["versions"]
    assert prov["written_at"].endswith("Z")
    assert prov["commit"] is None or len(prov["commit"].split("+")[0]) == 40


def test_versions_extra_distributions():
    v = versions(extra=("pandas",))
    assert v["pandas"] == pd.__version__ and list(v)[:1] == ["python"]
