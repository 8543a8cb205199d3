"""The paper's experiments that are neither a generation nor a retraining run, each stored as a
run of its own kind: ``robustness`` (§7's robustness experiment) and ``pollution``
(DeepXplore's detection of training-data pollution)."""
