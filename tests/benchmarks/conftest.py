"""The benchmarks' collections and the table of ratios against the performance targets.

``make bench`` times every benchmark (pytest-benchmark), then prints one table: each ratio computed
from the medians of this one session, against its target, with the machine's load average at the
start and the end; the same table goes into the pytest-benchmark JSON (``ratios``). ``make test``
runs every benchmark once, untimed, on small inputs, so that they keep working.

Sizes when timed: a 50,000 x 384 collection (``RAG_EVAL_BENCH_ROWS`` to change it) in Milvus Lite and,
when ``RAG_EVAL_MILVUS_SERVER_URI`` names a server, the same rows there (a collection of its own,
dropped at the end); 100,000 per-query rows for the measures.
"""

from __future__ import annotations

import itertools
import math
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusSearch, MilvusStore, SearchTarget

SERVER_ENV = "RAG_EVAL_MILVUS_SERVER_URI"
DIM = 384
N_QUERIES = 200


def timed(config: pytest.Config) -> bool:
    """True under ``make bench`` (--benchmark-enable), False when the benchmarks run once, untimed."""
    return bool(config.getoption("benchmark_enable", False))


@dataclass
class Results:
    """Medians (seconds) of this session's benchmarks, by name, and the machine's load."""

    medians: dict[str, float] = field(default_factory=dict)
    load_start: tuple[float, float, float] = field(default_factory=os.getloadavg)

    def record(self, name: str, benchmark: Any) -> None:
        stats = getattr(benchmark, "stats", None)
        if stats is not None:
            self.medians[name] = float(stats.stats.median)


RESULTS = Results()


@pytest.fixture(scope="session")
def results() -> Results:
    return RESULTS


@pytest.fixture(scope="session")
def rows_in_collection(pytestconfig: pytest.Config) -> int:
    return int(os.environ.get("RAG_EVAL_BENCH_ROWS", "50000")) if timed(pytestconfig) else 2000


def chunk_rows(n: int, seed: int = 3) -> tuple[list[ChunkRow], np.ndarray[Any, Any]]:
    """``n`` rows written the way production has them (10% re-ingested copies sharing a vector, 10%
    without chunk_index, 5% without doc_id, skewed documents), and ``N_QUERIES`` query vectors near them."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = np.minimum((rng.pareto(1.1, n) * 3).astype(int), max(1, n // 8))
    rows: list[ChunkRow] = []
    next_chunk: dict[int, int] = {}
    for i in range(n):
        if i > 0 and rng.random() < 0.10:  # a re-ingested copy: the same row and vector, a new vector id
            j = int(rng.integers(0, i))
            vectors[i] = vectors[j]
            rows.append(replace(rows[j], vector_id=i, vector=vectors[i]))
            continue
        doc = int(docs[i])
        chunk = next_chunk.get(doc, 0)
        next_chunk[doc] = chunk + 1
        rows.append(
            ChunkRow(
                vector_id=i,
                doc_id=None if rng.random() < 0.05 else f"doc-{doc}",
                chunk_index=None if rng.random() < 0.10 else chunk,
                content=f"doc-{doc} part {chunk}: " + "lorem ipsum " * int(rng.integers(10, 35)),
                title=f"Runbook {doc}",
                source=f"kb/doc-{doc}.md",
                category="ops",
                start=0,
                end=300,
                vector=vectors[i],
            )
        )
    picks = rng.integers(0, n, N_QUERIES)
    queries = vectors[picks] + 0.05 * rng.standard_normal((N_QUERIES, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return rows, queries


@dataclass(frozen=True)
class Collection:
    uri: str
    name: str
    queries: np.ndarray[Any, Any]
    backend: str

    def encoder(self) -> Callable[[Sequence[str]], list[list[float]]]:
        vectors = [q.tolist() for q in self.queries]
        return lambda texts: [vectors[int(t.removeprefix("q"))] for t in texts]

    def port(self) -> MilvusSearch:
        return MilvusSearch(SearchTarget(uri=self.uri, collection=self.name), self.encoder())


def _build(uri: str, name: str, n: int) -> Collection:
    rows, queries = chunk_rows(n)
    with MilvusStore(SearchTarget(uri=uri, collection=name), call_timeout=600) as store:
        store.create(dim=DIM, index=IndexSpec(), manifest={"benchmark": True, "rows": n})
        store.insert(rows)
        store.finalize()
    return Collection(uri, name, queries, "server" if "://" in uri else "lite")


@pytest.fixture(scope="session")
def lite_collection(tmp_path_factory: pytest.TempPathFactory, rows_in_collection: int) -> Collection:
    return _build(str(tmp_path_factory.mktemp("bench-lite") / "milvus.db"), "bench", rows_in_collection)


@pytest.fixture(scope="session")
def server_collection(rows_in_collection: int) -> Iterator[Collection]:
    uri = os.environ.get(SERVER_ENV)
    if not uri:
        pytest.skip(f"no Milvus server: set {SERVER_ENV} for the server's share")
    name = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        yield _build(uri, name, rows_in_collection)
    finally:
        with MilvusStore(SearchTarget(uri=uri, collection=name)) as store:
            store.drop()


# -- the table of ratios ---------------------------------------------------------------------------------

K_SWEEP = (20, 100, 1000, 10000)


def _k_log_k(k: int) -> float:
    return k * math.log(k)


def ratio_rows(medians: dict[str, float]) -> list[tuple[str, str, str, str]]:
    """(what, measured, target, met) for every target whose benchmarks ran in this session."""
    m = medians
    rows: list[tuple[str, str, str, str]] = []

    def add(what: str, value: float | None, shown: str, target: str, ok: bool | None) -> None:
        if value is not None and not math.isnan(value):
            rows.append((what, shown, target, "-" if ok is None else ("yes" if ok else "NO")))

    post20 = m.get("postprocess[evidence-k20-n5]")
    for backend, target in (("server", 0.01), ("lite", None)):
        search = m.get(f"search[{backend}-k20]")
        if post20 and search:
            share = post20 / search
            add(
                f"post-process k20/n5 as a share of one {backend} search at k20",
                share,
                f"{share:.2%} ({post20 * 1e6:.0f} us / {search * 1e3:.2f} ms)",
                "<= 1%" if target else "(reported)",
                share <= target if target else None,
            )
    sort20, sort10k = m.get("sort[k20]"), m.get("sort[k10000]")
    if post20 and sort20:
        add("post-process k20/n5 / sorted() of the same 20 (score, key) pairs", post20 / sort20,
            f"x{post20 / sort20:.1f} ({post20 * 1e6:.1f} / {sort20 * 1e6:.2f} us)", "(reported)", None)  # fmt: skip
    for n in (5, 50):
        big = m.get(f"postprocess[evidence-k10000-n{n}]")
        if big and sort10k:
            ratio = big / sort10k
            add(f"post-process k10,000/n{n} / sorted() of the same 10,000 (score, key) pairs", ratio,
                f"x{ratio:.1f} ({big * 1e3:.2f} / {sort10k * 1e3:.2f} ms)", "<= x10", ratio <= 10)  # fmt: skip
    for small, large in itertools.pairwise(K_SWEEP):
        a, b = m.get(f"postprocess[evidence-k{small}-n5]"), m.get(f"postprocess[evidence-k{large}-n5]")
        if a and b:
            bound = _k_log_k(large) / _k_log_k(small)
            add(
                f"growth k{small} -> k{large}",
                b / a,
                f"x{b / a:.1f}",
                f"<= x{bound:.1f} (k log k)",
                b / a <= bound,
            )
    copies, distinct = m.get("worst_case[copies]"), m.get("worst_case[distinct]")
    if copies and distinct:
        add(
            "10,000 copies of one chunk / 10,000 distinct hits",
            copies / distinct,
            f"x{copies / distinct:.2f} ({copies * 1e3:.1f} / {distinct * 1e3:.1f} ms)",
            "<= x2",
            copies / distinct <= 2,
        )
    ours = m.get("metrics[summarize]")
    if ours:
        add("metrics, 100,000 queries x 20 chunks (summarize)", ours, f"{ours:.2f} s", "<= 2 s", ours <= 2.0)
    theirs, theirs_cpu = m.get("paired[pytrec_eval]"), m.get("paired-cpu[pytrec_eval]")
    for name, what, bound in (
        ("summarize", "every summary measure (summarize)", 1.0),
        ("standard", "the same measures column-wise (chunk P, R, nDCG, Success at 1/3/5/10, RR)", 0.3),
    ):
        wall, cpu = m.get(f"paired[{name}]"), m.get(f"paired-cpu[{name}]")
        if wall and theirs and cpu and theirs_cpu:
            add(f"{what} / pytrec_eval, 100,000 x 20, paired rounds: wall (CPU)", wall / theirs,
                f"x{wall / theirs:.2f} (x{cpu / theirs_cpu:.2f}; {wall:.2f} / {theirs:.2f} s)", f"<= x{bound:g}",
                wall / theirs <= bound)  # fmt: skip
    pairs = m.get("overlap[100000]")
    if pairs:
        add("label-free overlap of 100,000 payload pairs of 5-10 keys (overlap_frame: changed, Jaccard, RBO)",
            pairs, f"{pairs:.2f} s", "<= 2 s", pairs <= 2.0)  # fmt: skip
    resolution = m.get("resolution[1000x50]")
    if resolution:
        add("labels of a collection built elsewhere: 1,000 documents x 50 rows located", resolution,
            f"{resolution:.2f} s", "<= 10 s", resolution <= 10.0)  # fmt: skip
    command = m.get("compare_command[default]")
    if command:
        add("`rag-eval compare` of the default experiment's run (264 queries, 5 configs), the whole command",
            command, f"{command:.2f} s", "<= 3 s", command <= 3.0)  # fmt: skip
    five = m.get("compare[264x5]")
    if five:
        add("compare(), synthetic 264 queries x 5 configs (worst case: every latency test redrawn)", five,
            f"{five:.2f} s", "(reported)", None)  # fmt: skip
    here, there = m.get("compare[4000x5-process]"), m.get("compare[4000x5-dask2]")
    if here and there:
        add("compare(), 4,000 queries x 5 configs: 2 Dask workers / this process", there / here,
            f"x{there / here:.2f} ({there:.1f} / {here:.1f} s)", "(reported)", None)  # fmt: skip
    small, large = m.get("compare[1000x2]"), m.get("compare[4000x2]")
    if small and large:
        exponent = math.log(large / small) / math.log(4)
        add("compare of two configs, 1,000 -> 4,000 queries: growth exponent", exponent,
            f"{exponent:.2f} ({small:.1f} / {large:.1f} s)", "(reported)", None)  # fmt: skip
    for backend, bound in (("lite", 1.15), ("server", 1.5)):
        replay, bare = m.get(f"replay[{backend}]"), m.get(f"bare_search[{backend}]")
        if replay and bare:
            add(
                f"replay (latency off) / bare batched pymilvus search, {backend}",
                replay / bare,
                f"x{replay / bare:.2f} ({replay * 1e3:.0f} / {bare * 1e3:.0f} ms)",
                f"<= x{bound:g}",
                replay / bare <= bound,
            )
    return rows


def _table() -> list[str]:
    rows = ratio_rows(RESULTS.medians)
    if not rows:
        return []
    load = os.getloadavg()
    widths = [max(len(r[i]) for r in [("what", "measured", "target", "met"), *rows]) for i in range(4)]
    line = " | ".join
    out = [
        f"ratios against the targets (medians of this session; {os.cpu_count()} CPUs, load average "
        f"{RESULTS.load_start[0]:.2f} at the start, {load[0]:.2f} at the end)",
        line(h.ljust(w) for h, w in zip(("what", "measured", "target", "met"), widths, strict=True)),
    ]
    out += [line(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for text in _table():
        terminalreporter.write_line(text)


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]) -> None:
    output_json["ratios"] = [
        {"what": w, "measured": m, "target": t, "met": ok} for w, m, t, ok in ratio_rows(RESULTS.medians)
    ]
    output_json["load_average"] = {"start": RESULTS.load_start, "end": os.getloadavg(), "cpus": os.cpu_count()}


def queries_cycle(n: int = N_QUERIES) -> Callable[[], str]:
    """Query names in turn (q0, q1, ...), so that a benchmark does not search one query again and again."""
    state = {"i": -1}

    def next_query() -> str:
        state["i"] = (state["i"] + 1) % n
        return f"q{state['i']}"

    return next_query
