# Two commands do everything on a fresh machine:
#   make demo   set up (venv + locked install) and run the quickstart spec
#   make test   set up if needed, type-check kgrag/ (mypy), run the whole test suite
# and one refreshes the lock on purpose:
#   make lock          re-resolve after editing pyproject.toml, keeping every pin it can
#   make lock-upgrade  re-resolve everything to the newest releases
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Every package of the test install (all extras), pinned with sha256 hashes by pip-tools;
# the pip that installs it; and what builds its sources (kgrag, llama-cpp-python).
LOCK       := requirements/lock.txt
PIP_LOCK   := requirements/pip.txt
BUILD_LOCK := requirements/build.txt
# pip-tools lives in a venv of its own: its click, build and wheel stay out of the project's.
TOOLS    := .venv-lock
COMPILE  := CUSTOM_COMPILE_COMMAND="make lock" $(TOOLS)/bin/pip-compile --quiet \
            --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
            --no-emit-find-links --newline LF

.PHONY: install demo test lint bench lock lock-upgrade

$(STAMP): pyproject.toml $(LOCK) $(PIP_LOCK) $(BUILD_LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(PIP_LOCK)
	# Exactly the locked files (torch is the CPU build; llama-cpp-python compiles once,
	# ~6 min, and pip caches the wheel), then kgrag itself, editable, adding nothing.
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK) --build-constraint $(BUILD_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e . --build-constraint $(BUILD_LOCK)
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kgrag run specs/quickstart.yaml

test: $(STAMP)
	$(BIN)/python -m tests.typecheck
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check kgrag tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/foundation.py

$(TOOLS)/.installed:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet pip==26.3 pip-tools==7.6.2
	touch $@

lock: $(TOOLS)/.installed
	$(COMPILE) --all-extras --output-file $(LOCK) pyproject.toml
	$(COMPILE) --output-file $(PIP_LOCK) requirements/pip.in
	$(COMPILE) --output-file $(BUILD_LOCK) requirements/build.in

lock-upgrade: $(TOOLS)/.installed
	$(COMPILE) --upgrade --all-extras --output-file $(LOCK) pyproject.toml
	$(COMPILE) --upgrade --output-file $(PIP_LOCK) requirements/pip.in
	$(COMPILE) --upgrade --output-file $(BUILD_LOCK) requirements/build.in
