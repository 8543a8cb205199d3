# The two commands of the README: `make run` (dashboard) and `make test` (test suite).
# Both run the idempotent set-up first (scripts/setup.sh); it does nothing when already done.
PORT ?= 8501
ADDRESS ?= localhost

.PHONY: run test setup test-slow train bench reports clean-runs

run: setup
	.venv/bin/python -m dashboard --server.port $(PORT) --server.address $(ADDRESS)

test:
	scripts/test.sh

setup:
	scripts/setup.sh

test-slow: setup
	scripts/test.sh -m slow

train: setup
	scripts/train_all.sh

bench: setup
	.venv/bin/python benchmarks/bench_coverage.py
	.venv/bin/python benchmarks/bench_generate.py

reports: setup
	.venv/bin/rnncon report coverage
	.venv/bin/rnncon report generation
	.venv/bin/rnncon report retraining
	.venv/bin/rnncon report text

clean-runs:
	rm -rf runs
