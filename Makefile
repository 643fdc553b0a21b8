# Two entry points a newcomer needs; each does its own set-up in .venv on a fresh machine.
#   make demo   - the whole flow on the embedded default (digital twin + shipped reference model)
#   make test   - the test suite (make test-fast: without the slow and system-touching tests)
#   make check  - what CI checks before the tests: ruff, ruff format, the type checker
#   make docs   - the API reference site from the docstrings (site/index.html)
# On a Jetson, install NVIDIA's torch wheel first and run with TORCH= (keeps your torch).
# The CPU-only torch wheel (about 200 MB instead of the CUDA build's 2.6 GB on Linux):
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c  # a failing benchmark fails `make bench` despite `| tee`
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
BIN := $(VENV)/bin
TRAIN_REFERENCE ?= tools/train_reference.py

.PHONY: setup demo test test-fast lint typecheck check docs bench bench-quick clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(if $(TORCH),$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)))
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/powertrain demo

# the tests run on every core (pytest-xdist); --dist loadfile keeps each file on one worker
PYTEST := $(BIN)/python -m pytest -n auto --dist loadfile

test: setup
	$(PYTEST)

# markers in pyproject.toml: slow (training, notebooks, benchmarks), system (subprocesses,
# signals, a browser, a wheel build)
test-fast: setup
	$(PYTEST) -m "not slow and not system"

lint: setup
	$(BIN)/ruff check powertrain tests benchmarks tools
	$(BIN)/ruff format --check powertrain tests benchmarks tools

typecheck: setup
	$(BIN)/mypy

check: lint typecheck

# The API reference from the docstrings (site/); --strict: a broken reference fails
docs: setup
	$(BIN)/python -m pip install -q -e ".[docs]"
	$(BIN)/python tools/results_page.py  # docs/results.md from benchmarks/results/*.json
	$(BIN)/mkdocs build --strict

# One run regenerates every file in benchmarks/results/ (all of them cited by the docs), in
# order, so they are one consistent set: the twin corpora, the shipped reference models,
# then every benchmark (its printed table in X.txt, its summary figures in X.json, plots
# and CSVs beside). A JSON file keeps the tables docs/results.md shows; each run's
# per-draw records go to benchmarks/results/detail/ (git-ignored). Hours on 2 cores.
RESULTS := benchmarks/results
PY := $(BIN)/python
bench: setup
	mkdir -p $(RESULTS)
	$(PY) tools/make_corpora.py --all
	# the power-monotone references first (a variant the docs compare against), then the
	# shipped unconstrained ones, which every later benchmark uses
	$(PY) $(TRAIN_REFERENCE) --monotone power orin-agx/resnet18 orin-agx/mobilenetv3
	$(PY) benchmarks/optimisation.py --json $(RESULTS)/optimisation_monotone_power.json --png $(RESULTS)/optimisation_monotone_power.png | tee $(RESULTS)/optimisation_monotone_power.txt
	$(PY) benchmarks/optimisation.py --draws 30 --strategies PT@50 --json $(RESULTS)/optimisation_pt50_30draws_monotone_power.json | tee $(RESULTS)/optimisation_pt50_30draws_monotone_power.txt
	$(PY) $(TRAIN_REFERENCE) orin-agx/resnet18 orin-agx/mobilenetv3
	$(PY) $(TRAIN_REFERENCE) jetson/resnet18  # the Jetson family (opt-in reference)
	$(PY) benchmarks/twin_calibration.py --json $(RESULTS)/twin_calibration.json | tee $(RESULTS)/twin_calibration.txt
	$(PY) benchmarks/optimisation.py --json $(RESULTS)/optimisation.json --png $(RESULTS)/optimisation.png | tee $(RESULTS)/optimisation.txt
	$(PY) benchmarks/optimisation.py --draws 30 --strategies PT@50 --json $(RESULTS)/optimisation_pt50_30draws.json | tee $(RESULTS)/optimisation_pt50_30draws.txt
	$(PY) benchmarks/batch_selection.py --json $(RESULTS)/batch_selection.json | tee $(RESULTS)/batch_selection.txt
	$(PY) benchmarks/real_data.py --json $(RESULTS)/real_data.json | tee $(RESULTS)/real_data.txt
	$(PY) benchmarks/real_data.py --monotone power --json $(RESULTS)/real_data_monotone_power.json | tee $(RESULTS)/real_data_monotone_power.txt
	# decisions.json: the earlier contest loop and the cap schedule; decisions_table.json: the default table method
	$(PY) benchmarks/decisions.py --method contest --sections per-cap shared baselines real schedule --json $(RESULTS)/decisions.json --png $(RESULTS)/decisions.png | tee $(RESULTS)/decisions.txt
	$(PY) benchmarks/decisions.py --sections per-cap shared real peers held-out cross-device --per-cap-budget 25 --json $(RESULTS)/decisions_table.json | tee $(RESULTS)/decisions_table.txt
	$(PY) benchmarks/frequency.py --draws 1 --json $(RESULTS)/frequency.json | tee $(RESULTS)/frequency.txt
	$(PY) benchmarks/frequency.py --draws 3 --json $(RESULTS)/frequency_clock.json | tee $(RESULTS)/frequency_clock.txt
	$(PY) benchmarks/real_gpu.py --json $(RESULTS)/real_gpu.json
	$(PY) benchmarks/tuner_real_gpu.py --json $(RESULTS)/tuner_real_gpu.json
	$(PY) benchmarks/accuracy.py --out $(RESULTS) --json $(RESULTS)/accuracy.json | tee $(RESULTS)/accuracy.txt
	$(PY) benchmarks/accuracy.py --sizes 20 50 --no-floors --no-matrix --json $(RESULTS)/accuracy_rerun.json | tee $(RESULTS)/accuracy_rerun.txt
	$(PY) benchmarks/accuracy.py --sizes 20 50 --no-floors --no-matrix --monotone power --json $(RESULTS)/accuracy_monotone_power.json | tee $(RESULTS)/accuracy_monotone_power.txt
	$(PY) benchmarks/accuracy.py --sizes 20 50 --no-floors --no-matrix --monotone device --json $(RESULTS)/accuracy_monotone_device.json | tee $(RESULTS)/accuracy_monotone_device.txt
	$(PY) benchmarks/cross_device.py --draws 10 --json $(RESULTS)/cross_device.json | tee $(RESULTS)/cross_device.txt
	$(PY) $(TRAIN_REFERENCE) jetson/resnet18 --leave-out orin-nano --out $(QUICK)/loo
	$(PY) benchmarks/cross_device.py --draws 10 --only orin-nano_ --references orin-agx/resnet18 $(QUICK)/loo/jetson/resnet18 --json $(RESULTS)/cross_device_loo.json | tee $(RESULTS)/cross_device_loo.txt
	$(PY) benchmarks/calibration.py --json $(RESULTS)/calibration.json | tee $(RESULTS)/calibration.txt
	$(PY) benchmarks/calibration.py --budget 25 --json $(RESULTS)/calibration_budget25.json | tee $(RESULTS)/calibration_budget25.txt
	$(PY) benchmarks/calibration.py --draws 6 --reference jetson/resnet18 --json $(RESULTS)/calibration_family.json | tee $(RESULTS)/calibration_family.txt
	$(PY) benchmarks/speed.py --out $(RESULTS) --json $(RESULTS)/speed.json | tee $(RESULTS)/speed.txt
	$(PY) benchmarks/select_margin.py --json $(RESULTS)/select_margin.json | tee $(RESULTS)/select_margin.txt
	$(PY) benchmarks/tuning_regret.py --draws 3 --caps-per-trace 2 --json $(RESULTS)/tuning_regret.json | tee $(RESULTS)/tuning_regret.txt
	$(PY) benchmarks/tuning_regret.py --sections twin --strategies tuner tuner-safe --budgets 10 20 40 --draws 5 --background 3 --json $(RESULTS)/tuning_regret_hardcap.json | tee $(RESULTS)/tuning_regret_hardcap.txt
	$(PY) benchmarks/super_caps.py --json $(RESULTS)/orin_nano_super.json | tee $(RESULTS)/orin_nano_super.txt
	$(PY) tools/results_page.py

# CI-sized: every benchmark's --quick setting into a scratch folder (the committed results
# stay as they are), and the results page checked against the committed files.
QUICK := $(or $(TMPDIR),/tmp)/powertrain-bench-quick
bench-quick: setup
	mkdir -p $(QUICK)
	$(PY) benchmarks/optimisation.py --quick --json $(QUICK)/optimisation.json
	$(PY) benchmarks/real_data.py --quick --json $(QUICK)/real_data.json
	$(PY) benchmarks/frequency.py --quick --json $(QUICK)/frequency.json
	$(PY) benchmarks/batch_selection.py --quick --json $(QUICK)/batch_selection.json
	$(PY) tools/results_page.py --check

clean:
	rm -rf $(VENV) build site *.egg-info
