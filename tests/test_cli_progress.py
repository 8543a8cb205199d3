"""`rnncon retrain`'s progress on stderr (issue 41): a line per stage, held-out set, repeat and
epoch with the time left once batches are timed, a line now and then inside an epoch, nothing
for every batch."""
from rnncon_core.cli import retrain as cli_retrain


def test_retrain_progress_says_each_stage_and_the_time_left(capsys, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(cli_retrain.time, "monotonic", lambda: clock[0])
    p = cli_retrain._Progress()
    total = 400

    def tell(done, message, **event):
        p({"done": done, "total": total, "message": message, **event})

    tell(0, "held-out transfer set 1/2: rconc against the original model (100 seeds)",
         stage="transfer", set=1)
    tell(0, "evaluating the original model", stage="before")
    for b in range(1, 101):                      # one epoch of 100 batches, 1 s each
        clock[0] += 1.0
        tell(b, f"repeat 1/2, generated arm, epoch 1/2, batch {b}/100", stage="train", batch=b)
    tell(100, "repeat 1/2, generated arm, epoch 1/2", stage="train", epoch=1)
    tell(total, "finished", stage="done")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[retrain] held-out transfer set 1/2: rconc")
    assert "left" not in lines[0] and "left" not in lines[1]      # nothing timed yet
    inside = [ln for ln in lines if "training batches" in ln]
    assert 2 <= len(inside) <= 4, lines        # every 30 s inside the epoch, not per batch
    end = next(ln for ln in lines if ln.endswith("left") and "epoch 1/2 ·" in ln)
    assert "about 5 min 00 s left" in end, end  # 300 batches to go at 1 batch a second
    assert lines[-1] == "[retrain] finished"
