#!/usr/bin/env bash
# Train and ship every model of Table 1 plus the FID/IS feature network (minutes for
# MNIST, about an hour for the four IMDB models on 2 CPU cores). Usage: scripts/train_all.sh [NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(mnist-lstm mnist-gru stacked-mnist-lstm stacked-mnist-gru mnist-features
                                imdb-lstm imdb-gru stacked-imdb-lstm stacked-imdb-gru)
for n in "${names[@]}"; do
  .venv/bin/rnncon train "$n"
done
