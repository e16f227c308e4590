"""HTML report size and render time at 1,000 queries x 5 configs (pytest-benchmark; `make bench`).

`make test` renders once, untimed, and checks the size bound (< 5 MB); `make bench` times the
render (median of 5) and checks that the default report (300 queries in the drill-down) stays
under 5 s; the report with all 1,000 queries in the drill-down is timed for information. The run
is made by the real pipeline over a scripted in-memory port (tests/report_runs.py): 1,000
queries, legacy and a cap sweep of four.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_eval.reports.html import render_html
from tests.report_runs import synthetic_run

CONFIGS = (
    ("legacy", {"rag.pipeline": "legacy", "rag.top-k": 5}),
    ("cap1", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 1}),
    ("cap2", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 2}),
    ("cap3", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 3}),
    ("cap4", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 4}),
)
MAX_BYTES = 5_000_000
MAX_SECONDS = 5.0


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield synthetic_run(tmp_path_factory.mktemp("big") / "run", n_queries=1000, configs=CONFIGS, render=False)


@pytest.mark.slow
@pytest.mark.parametrize("max_queries", [None, 1000])
def test_report_1000_queries_5_configs(benchmark, big_run: Path, max_queries: int | None) -> None:  # type: ignore[no-untyped-def]
    """Default drill-down (300 queries: the most changed and the worst), and every query in it."""
    out = big_run / f"report-{max_queries}.html"
    path = benchmark.pedantic(
        render_html, args=(big_run,), kwargs={"max_queries": max_queries, "out": out}, rounds=5, iterations=1
    )
    size = path.stat().st_size
    assert size < MAX_BYTES, f"{size / 1e6:.2f} MB"
    html = path.read_text()
    assert "Sweep" in html and html.count("<svg") >= 4
    kept = len(re.findall(r'<tr data-q="', html))
    assert kept == (max_queries or 300) and ("Showing 300 of 1000 queries" in html) == (max_queries is None)
    if benchmark.stats is not None and max_queries is None:  # timed under `make bench`; the default is the bound
        assert benchmark.stats.stats.median < MAX_SECONDS
