"""Experiment (not shipped), run from the repository root:

    PYTHONPATH=. .venv/bin/python reports/campaign/experiments/none_faults_only.py mnist-lstm

Is the guides' lead over none (current loop, reports/campaign) from what the criteria measure,
or from keeping fewer mutants? Variant "none-faults-only": guide none keeps only the new
distinct faults (what every guide keeps once its coverage has saturated) and no other mutant.
Same seeds, budget and repeats as reports/campaign (12,000 calls, 100 seeds, seed = repeat).
Done by patching Campaign.step's keep rule in this process only."""
import json, sys, inspect, textwrap
import numpy as np
from rnncon_core.campaign import loop as L, run_campaign
from rnncon_core.runs import RunStore
src = textwrap.dedent(inspect.getsource(L.Campaign.step))
old = "keep = (pred == label) & (gain > 0) if self.guide is not None else pred == label"
assert old in src
new = "keep = (pred == label) & (gain > 0) if self.guide is not None else np.zeros(len(pred), bool)"
ns = {}
exec(compile(src.replace(old, new), "step", "exec"), L.__dict__, ns)
L.Campaign.step = ns["step"]
store = RunStore()          # RNNCON_RUNS or ./runs
model = sys.argv[1] if len(sys.argv) > 1 else "mnist-lstm"
for r in range(5):
    s = run_campaign(model, guide="none", budget="12000calls", seeds=100, seed=r, store=store)
    print(json.dumps({"variant": "none-faults-only", "model": model, "repeat": r,
                      "distinct_faults": s["distinct_faults"], "pairs": s["distinct_pairs"],
                      "queue": s["queue"], "calls": s["calls"]}), flush=True)
