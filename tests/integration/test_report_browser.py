"""The HTML report in a real browser: Debian's Chromium, headless, driven by Playwright.

Playwright drives the system browser (``/usr/bin/chromium``, or ``RAG_EVAL_CHROMIUM``); it never
downloads one. `make test` and `.ci/run` install Debian's ``chromium`` where it is missing; the
tests skip only where no browser is installed and none can be (outside CI: in CI a missing
browser fails them).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.report_runs import HOSTILE, synthetic_run

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    for candidate in (os.environ.get("RAG_EVAL_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    reason = "no Chromium (/usr/bin/chromium): `make test` installs Debian's chromium where apt-get can"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + "; CI must have it")
    pytest.skip(reason)


class Page:
    """One page load with everything it tried to fetch, logged or raised recorded."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.page = context.new_page()
        self.requests: list[str] = []
        self.console: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, path: Path) -> Any:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_load_state("load")
        return self.page

    def problems(self, path: Path) -> list[str]:
        uri = path.resolve().as_uri()
        return (
            [f"request {u}" for u in self.requests if u != uri]
            + [f"console {t}: {m}" for t, m in self.console if t in ("error", "warning")]
            + [f"page error {e}" for e in self.errors]
            + [f"dialog {d}" for d in self.dialogs]
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) drives the browser")
    profile = tempfile.mkdtemp(prefix="rag-eval-chromium-")  # a fresh user data dir
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        # anything but the report's own file is refused and recorded by Page
        context.route(
            "**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort()
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_run(tmp_path_factory.mktemp("browser") / "run", n_queries=40)


def visible_rows(page: Any) -> list[str]:
    rows = page.eval_on_selector_all("#drill tbody tr:not(.detail):not(.hidden)", "rs => rs.map(r => r.dataset.q)")
    return list(rows)


def test_report_opens_offline_with_no_error_and_a_screenshot(browser: Any, run: Path) -> None:
    tab = Page(browser)
    page = tab.open(run / "report.html")
    shot = run / "report.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.locator("#verdict").is_visible()
    verdict = page.inner_text("#verdict")
    assert "evidence" in verdict and "same-document multi-chunk recall" in verdict
    assert page.locator("#charts svg").count() >= 3 and page.locator("#drill-controls").is_visible()
    assert page.inner_text("#q-count") == "40 of 40 shown"
    assert tab.problems(run / "report.html") == []
    page.close()


def test_filters_match_the_rows(browser: Any, run: Path) -> None:
    tab = Page(browser)
    page = tab.open(run / "report.html")
    pq = pd.read_parquet(run / "per_query.parquet")
    got = pq.assign(n=pq["delivered_relevant"].map(len)).pivot(index="query_id", columns="config", values="n")

    page.fill("#q-search", "q0007")
    assert visible_rows(page) == ["q0007"] and page.inner_text("#q-count") == "1 of 40 shown"
    page.fill("#q-search", "")

    # improved for evidence-cap3: more relevant chunks delivered than the baseline (oracle from the rows)
    page.select_option("#q-config", label="evidence-cap3")
    page.select_option("#q-status", "improved")
    expected = sorted(got.index[got["evidence-cap3"] > got["legacy"]])
    assert sorted(visible_rows(page)) == expected
    page.select_option("#q-status", "degraded")
    assert sorted(visible_rows(page)) == sorted(got.index[got["evidence-cap3"] < got["legacy"]])

    # lost at the cap, for any config
    page.select_option("#q-status", "")
    page.select_option("#q-config", "")
    page.select_option("#q-stage", "cap")
    capped = sorted({q for q, stages in zip(pq["query_id"], pq["lost_stages"], strict=True) if "cap" in list(stages)})
    assert capped and sorted(visible_rows(page)) == capped
    assert tab.problems(run / "report.html") == []
    page.close()


def test_drill_down_shows_evidence_blocks_and_losses(browser: Any, run: Path) -> None:
    tab = Page(browser)
    page = tab.open(run / "report.html")
    pq = pd.read_parquet(run / "per_query.parquet")
    row = pq[(pq["config"] == "evidence") & pq["lost_stages"].map(lambda s: "cap" in list(s))].iloc[0]
    qid = row["query_id"]
    page.click(f'#drill tr[data-q="{qid}"] button.open')
    detail = page.locator("#drill tr.detail")
    assert detail.count() == 1
    text = detail.inner_text()
    for heading in ("Relevant chunks", "Delivered blocks, side by side", "Relevant chunks not delivered"):
        assert heading in text
    # the chunk lost at the cap, with the chunks of its document that were kept
    lost = row["lost_chunks"][list(row["lost_stages"]).index("cap")]
    assert "evidence: lost (cap)" in text and f"{lost} — cap" in text
    kept = [c for c, d in zip(row["member_chunks"], row["member_doc_ids"], strict=True) if d == lost.split("#")[0]]
    assert kept and all(k in text for k in kept)
    # evidence spans are highlighted with the text of the span, as the data set has it
    spans = pd.read_parquet(run / "spans.parquet")
    texts = pd.read_parquet(run / "texts.parquet").set_index("chunk")
    marks = detail.locator("mark").evaluate_all("ms => ms.map(m => m.textContent)")
    span_texts = []
    for s in spans[spans["query_id"] == qid].itertuples():
        for chunk in texts[texts["doc_id"] == s.doc_id].itertuples():
            lo, hi = max(s.start, chunk.start), min(s.end, chunk.end)
            if lo < hi:
                span_texts.append(chunk.text[lo - chunk.start : hi - chunk.start])
    assert marks and set(marks) <= set(span_texts)
    # the delivered blocks of each config, with rank, evidence key and score
    assert text.count("#1 · evidence key") == 3
    page.click(f'#drill tr[data-q="{qid}"] button.open')
    assert page.locator("#drill tr.detail").count() == 0
    assert tab.problems(run / "report.html") == []
    page.close()


def test_hostile_text_shows_as_text_and_runs_nothing(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = synthetic_run(tmp_path_factory.mktemp("hostile") / "run", n_queries=12, hostile=True)
    tab = Page(browser)
    page = tab.open(run / "report.html")
    page.click('#drill tr[data-q="q0000"] button.open')
    detail = page.inner_text("#drill tr.detail")
    for h in HOSTILE:
        assert h in detail  # the query and the corpus text, shown as written
    assert page.evaluate("() => window.__pwned") is None
    counts = page.evaluate(
        "() => ({img: document.images.length, textarea: document.querySelectorAll('textarea').length,"
        " script: document.scripts.length,"
        " b: Array.from(document.querySelectorAll('#queries b')).map(b => b.textContent)})"
    )
    assert counts["img"] == 0 and counts["textarea"] == 0 and counts["script"] == 2
    # bold only for the config headings of the side-by-side columns: nothing from the data became a tag
    assert {b.removesuffix(" (baseline)") for b in counts["b"]} == {"legacy", "evidence", "evidence-cap3"}
    page.fill("#q-search", "{{ 7*7 }}")
    assert visible_rows(page) == ["q0000"]
    assert "49" not in json.dumps(page.inner_text("#drill tr.detail").split("{{ 7*7 }}")[0][-5:])
    assert tab.problems(run / "report.html") == []
    page.close()


def test_without_javascript_the_verdict_tables_and_charts_show(browser: Any, run: Path) -> None:
    context = browser.browser.new_context(java_script_enabled=False) if browser.browser else None
    if context is None:  # a persistent context has no parent browser object: use a page with JS off
        pytest.skip("this Playwright cannot open a context without JavaScript here")
    page = context.new_page()
    page.goto((run / "report.html").resolve().as_uri())
    assert "same-document multi-chunk recall" in page.inner_text("#verdict")
    assert page.locator("#metric-table tbody tr").count() > 20
    assert page.locator("#charts svg").count() >= 3
    assert page.locator("#drill tbody tr").count() == 40 and not page.locator("#drill-controls").is_visible()
    context.close()


FIVE_CONFIGS = (
    ("legacy-merge", {"rag.pipeline": "legacy", "rag.top-k": 5}),
    ("legacy-first", {"rag.pipeline": "legacy-first", "rag.top-k": 5}),
    ("evidence", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 2}),
    ("evidence-top-k-only", {"rag.top-k": 5, "rag.max-chunks-per-document": 2}),
    ("whatif-evidence-cap-three", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 3}),
)


def test_the_report_of_five_configs_fits_a_1400_px_window(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Five configs compared under the shipped gates, the widest report there is: nothing scrolls sideways, every
    config's column is on screen, and a gate chip says its outcome once and its check in words."""
    import rag_eval.compare
    from rag_eval.compare.gates import load_gates
    from rag_eval.jobs.compare import Judging, compare_runs
    from rag_eval.reports.html import render_html

    work = tmp_path_factory.mktemp("five")
    run = synthetic_run(work / "run", n_queries=20, configs=FIVE_CONFIGS, render=False)
    shipped = (Path(rag_eval.compare.__file__).parent / "shipped" / "default.toml").read_text(encoding="utf-8")
    gates = work / "gates.toml"  # the shipped checks, with fewer bootstrap resamples: a rendering test
    gates.write_text(shipped.replace("resamples = 4999", "resamples = 499"), encoding="utf-8")
    compare_runs(run, Judging(gates=load_gates(gates)))
    render_html(run)
    tab = Page(browser)
    page = tab.page
    page.set_viewport_size({"width": 1400, "height": 1000})
    tab.open(run / "report.html")
    shot = run / "report-1400.png"
    page.screenshot(path=str(shot), full_page=True)
    widths = page.evaluate("() => ({scroll: document.documentElement.scrollWidth, inner: innerWidth})")
    assert widths["scroll"] <= widths["inner"] == 1400, widths
    # every column header of the Measures table is inside the window
    right = page.evaluate(
        "() => Math.max(...Array.from(document.querySelectorAll('#metric-table thead th'))"
        ".map(th => th.getBoundingClientRect().right))"
    )
    assert right <= 1400
    headers = page.eval_on_selector_all("#metric-table thead th", "ths => ths.map(th => th.textContent.trim())")
    assert headers[0] == "measure" and [h.removesuffix("baseline").strip() for h in headers[1:]] == [
        n for n, _ in FIVE_CONFIGS
    ]
    chips = page.eval_on_selector_all("#verdict .chip", "cs => cs.map(c => c.textContent)")
    assert chips and all(c.split(" – ")[0] in ("pass", "warn", "fail", "underpowered", "error") for c in chips)
    assert all(c.count(c.split(" – ")[0]) == 1 and "_" not in c for c in chips), chips
    assert tab.problems(run / "report.html") == []
    page.close()
