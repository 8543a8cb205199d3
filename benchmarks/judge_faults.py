"""Judge a campaign's faults with classifiers the validity oracle does not use: what share of
its valid (and of its invalid) faults each reads as the root seed's label.

    python benchmarks/judge_faults.py RUN_ID [--runs-dir DIR]

Judges: ``mnist-features`` (the shipped FID/IS CNN: not trained for validity, another
architecture than the oracle's reference) and, trained here on the same training split, an
RBF support-vector machine on raw pixels (scikit-learn) and an augmented CNN like the issue's
checker (rotation, shift and zoom). Also: SSIM to the root seed and the share of changed
pixels (median and 10th percentile) of valid faults.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np


def svm_judge(ds):
    from sklearn.svm import SVC
    clf = SVC(C=5.0, gamma="scale").fit(ds.x_train.reshape(len(ds.x_train), -1), ds.y_train)
    acc = float(np.mean(clf.predict(ds.x_test.reshape(len(ds.x_test), -1)) == ds.y_test))
    return (lambda x: clf.predict(x.reshape(len(x), -1))), acc


def augmented_cnn_judge(ds, seed=1):
    import keras
    keras.utils.set_random_seed(seed)
    L = keras.layers
    clf = keras.Sequential([keras.Input((28, 28)), L.Permute((2, 1)), L.Reshape((28, 28, 1)),
                            L.Conv2D(32, 3, activation="relu"), L.Conv2D(32, 3, activation="relu"),
                            L.MaxPooling2D(), L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(),
                            L.Flatten(), L.Dense(128, activation="relu"), L.Dropout(0.5),
                            L.Dense(10, activation="softmax")])
    aug = keras.Sequential([keras.Input((28, 28)), L.Permute((2, 1)), L.Reshape((28, 28, 1)),
                            L.RandomRotation(20 / 360, fill_mode="constant"),
                            L.RandomTranslation(0.12, 0.12, fill_mode="constant"),
                            L.RandomZoom(0.15, fill_mode="constant"), L.Reshape((28, 28)),
                            L.Permute((2, 1)), clf])
    aug.compile("adam", "sparse_categorical_crossentropy")
    aug.fit(ds.x_train, ds.y_train, epochs=15, batch_size=128, verbose=0)
    pred = lambda x: clf.predict(x, verbose=0, batch_size=512).argmax(1)
    return pred, float(np.mean(pred(ds.x_test) == ds.y_test))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--runs-dir")
    ap.add_argument("--judges", default="features,svm,cnn")
    a = ap.parse_args()
    from skimage.metrics import structural_similarity as ssim

    from rnncon_core.campaign import load_campaign
    from rnncon_core.data import load_dataset
    from rnncon_core.runs import RunStore
    from rnncon_core.zoo import load_model
    store = RunStore(a.runs_dir) if a.runs_dir else RunStore()
    info = store.get(a.run)
    c = load_campaign(info)
    f, seeds = c["faults"], c["seeds"]
    ds = load_dataset(c["config"]["dataset"])
    x, label, valid = f["x"], f["label"], f["valid"].astype(bool)
    roots = seeds["x"][f["root"]]
    print(f"run {a.run}: {len(x)} faults, {valid.sum()} valid, {(~valid).sum()} invalid; "
          f"summary: {c['summary'].get('fault_classes')} fault classes, "
          f"{c['summary'].get('fault_roots')} roots")
    judges = {}
    if "features" in a.judges:
        m = load_model("mnist-features")
        fp = lambda z: m.predict(z, verbose=0, batch_size=512).argmax(1)
        judges["mnist-features"] = (fp, float(np.mean(fp(ds.x_test) == ds.y_test)))
    if "svm" in a.judges:
        judges["svm-rbf"] = svm_judge(ds)
    if "cnn" in a.judges:
        judges["augmented-cnn"] = augmented_cnn_judge(ds)
    for name, (pred, acc) in judges.items():
        p = pred(x)
        for what, sel in (("valid", valid), ("invalid", ~valid), ("all", np.ones_like(valid))):
            if sel.sum():
                print(f"{name:15s} (clean test acc {acc:.2%}) reads the seed's label on "
                      f"{np.mean(p[sel] == label[sel]):6.1%} of {what} faults ({sel.sum()}); "
                      f"the model's label on {np.mean(p[sel] == f['pred'][sel]):5.1%}")
    s = np.array([ssim(r.astype(np.float64), z.astype(np.float64), data_range=1.0)
                  for r, z in zip(roots, x)])
    changed = np.mean(np.abs(roots - x) > 1e-6, axis=(1, 2))
    for what, sel in (("valid", valid), ("invalid", ~valid)):
        if sel.sum():
            print(f"{what}: SSIM to root median {np.median(s[sel]):.2f} (p10 "
                  f"{np.quantile(s[sel], 0.1):.2f}); changed pixels median "
                  f"{np.median(changed[sel]):.0%}")


if __name__ == "__main__":
    main()
