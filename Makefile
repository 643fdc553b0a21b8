# Two entry points a newcomer needs; each does its own set-up in .venv on a fresh machine.
#   make demo   - the whole flow on the embedded default (digital twin + shipped reference model)
#   make test   - the test suite
# On a Jetson, install NVIDIA's torch wheel first and run with TORCH= (keeps your torch).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(if $(TORCH),$(BIN)/python -m pip install -q "$(TORCH)")
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/powertrain demo

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check powertrain tests benchmarks

bench: setup
	$(BIN)/python benchmarks/twin_calibration.py --json benchmarks/results/twin_calibration.json
	$(BIN)/python benchmarks/accuracy.py --json benchmarks/results/accuracy.json
	$(BIN)/python benchmarks/speed.py --json benchmarks/results/speed.json

clean:
	rm -rf $(VENV) build *.egg-info
