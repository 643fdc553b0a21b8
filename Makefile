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

.PHONY: setup demo test test-fast lint typecheck check docs bench clean

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

# One run regenerates everything the results depend on, in order, so benchmarks/results/
# is one consistent set: the twin corpora, the shipped reference models, then every
# benchmark (its printed table in X.txt, its figures in X.json, plots and CSVs beside).
RESULTS := benchmarks/results
bench: setup
	mkdir -p $(RESULTS)
	$(BIN)/python tools/make_corpora.py --all
	$(BIN)/python $(TRAIN_REFERENCE) orin-agx/resnet18
	$(BIN)/python $(TRAIN_REFERENCE) orin-agx/mobilenetv3
	$(BIN)/python $(TRAIN_REFERENCE) jetson/resnet18
	$(BIN)/python benchmarks/twin_calibration.py --json $(RESULTS)/twin_calibration.json | tee $(RESULTS)/twin_calibration.txt
	$(BIN)/python benchmarks/optimisation.py --json $(RESULTS)/optimisation.json --png $(RESULTS)/optimisation.png | tee $(RESULTS)/optimisation.txt
	$(BIN)/python benchmarks/batch_selection.py --json $(RESULTS)/batch_selection.json | tee $(RESULTS)/batch_selection.txt
	$(BIN)/python benchmarks/real_data.py --json $(RESULTS)/real_data.json | tee $(RESULTS)/real_data.txt
	$(BIN)/python benchmarks/decisions.py --json $(RESULTS)/decisions.json --png $(RESULTS)/decisions.png | tee $(RESULTS)/decisions.txt
	$(BIN)/python benchmarks/frequency.py --json $(RESULTS)/frequency.json | tee $(RESULTS)/frequency.txt
	$(BIN)/python benchmarks/real_gpu.py --json $(RESULTS)/real_gpu.json
	$(BIN)/python benchmarks/accuracy.py --out $(RESULTS) --json $(RESULTS)/accuracy.json | tee $(RESULTS)/accuracy.txt
	$(BIN)/python benchmarks/cross_device.py --json $(RESULTS)/cross_device.json | tee $(RESULTS)/cross_device.txt
	$(BIN)/python benchmarks/calibration.py --json $(RESULTS)/calibration.json | tee $(RESULTS)/calibration.txt
	$(BIN)/python benchmarks/speed.py --out $(RESULTS) --json $(RESULTS)/speed.json | tee $(RESULTS)/speed.txt
	$(BIN)/python benchmarks/select_margin.py --json $(RESULTS)/select_margin.json | tee $(RESULTS)/select_margin.txt
	$(BIN)/python tools/results_page.py

clean:
	rm -rf $(VENV) build site *.egg-info
