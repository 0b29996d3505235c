# Two commands on a fresh machine:  make demo  (the main job)  and  make test  (the tests).
# Both create .venv and install what they need on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench lint clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch 2.13.0 is the CPU build that this workplace serves; a bare "torch" would be a
	# multi-GB CUDA build. It satisfies the [bench] extra's torch>=2.0, so pip keeps it.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[bench,report,dask,test]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/chokepoint demo

bench: $(VENV)/.installed
	$(PY) benchmarks/kernels.py

lint: $(VENV)/.installed
	$(PY) -m ruff check src tests benchmarks

# Two runs: the modules marked untimed (kernels compiled and their values checked: most of the
# suite's compile time, nothing timed) on both cores at once, then the rest, which time things,
# one at a time as a user's program would run.
test: lint
	$(PY) -m pytest -q -n 2 -m untimed
	$(PY) -m pytest -q -m "not untimed"

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
