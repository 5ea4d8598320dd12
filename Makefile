# Two commands do everything on a fresh machine:
#   make demo   set up (venv + pinned install) and run the quickstart spec
#   make test   set up if needed and run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch is pinned to the CPU build in pyproject.toml; llama-cpp-python compiles once (~6 min).
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kgrag run specs/quickstart.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check kgrag tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/foundation.py
