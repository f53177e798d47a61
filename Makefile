# The README's two commands:
#   make test   set up, build, backend compile checks (gfx942, sm_90a), then pytest
#   make bench  set up, build, then the side-by-side benchmark on its default shapes
PYTHON ?= python3
export PYTHON

.PHONY: test bench build setup

test: build
	bash scripts/compile_checks.sh
	$(PYTHON) -m pytest tests

bench: build
	$(PYTHON) -m benchmarks.bench

build: setup
	$(PYTHON) scripts/build.py

setup:
	bash scripts/setup.sh
