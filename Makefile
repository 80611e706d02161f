# recurrent-lab: `make report` and `make test` install everything they need on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= quick
JOBS ?= 2
# torch first, pinned to the CPU build these machines keep on disk (an unpinned torch pulls a multi-GB CUDA build)
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install report serve test test-all bench gpu gpu-wheels lint chromium clean help

help:
	@echo "make report   install, execute every notebook (PROFILE=$(PROFILE)), write reports/$(PROFILE)/index.html"
	@echo "make test     install (chromium too), run the tests (not the slow ones) in $(WORKERS) workers"
	@echo "make test-all the tests including the slow ones"
	@echo "make serve    serve the dashboards on http://127.0.0.1:5006"
	@echo "make bench    lab bench scan, pde (against exponax, installed here) and layers"
	@echo "make gpu      on a CUDA machine: lab bench gpu and ssm_ltl's full profile on the GPU (.ci/gpu)"

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

report: install
	$(BIN)/lab report --profile $(PROFILE) --jobs $(JOBS)

serve: install
	$(BIN)/lab serve

bench: install
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/lab bench scan
	$(BIN)/lab bench pde
	$(BIN)/lab bench layers

gpu:
	.ci/gpu

# what a lent GPU machine's python3 lacks of the lab's needs (its image holds torch, Triton, numpy, xarray, numba):
# wheels for Python 3.12 in .whl/, which .ci/gpu installs there
GPU_WHEELS := dask==2026.8.0 distributed==2026.8.0 h5netcdf==1.8.3 locket==1.0.0 partd==1.4.2 tblib==3.2.2 \
	zict==3.0.0 tornado==6.6.1
gpu-wheels:
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-d .whl $(GPU_WHEELS)

chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ]; then \
		echo "installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "The dashboard tests need Debian's chromium: run 'sudo apt-get install chromium' (or make test as root)."; \
		exit 1; \
	fi

# two pytest-xdist workers on the 2 cores; a method's tests share one worker (and its ci run), see tests/conftest.py;
# the 25 slowest test phases are listed at the end (make test should stay within about 12 minutes)
WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadgroup --durations=25

test: install chromium
	$(PYTEST) -m "not slow"

test-all: install chromium
	$(PYTEST)

lint: install
	$(BIN)/ruff check lab kernels dashboards tests

clean:
	rm -rf reports results .pytest_cache
