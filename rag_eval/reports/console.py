"""Everything the commands print: the run's table, the gates, the history, the load table and the lines
that say what a command did.

The run's table has a row per measure and a column per config; labels and decimals are the registry's
(:mod:`rag_eval.metrics.registry`), and a value the summary lacks prints as ``-``. Tables and the lines
around them go through rich with every text of the user's (names, paths, notes, messages) escaped
(``rich.markup.escape``), so that ``[bold]`` in a path prints as itself; the one-line reports of
``ingest``, ``embed``, ``accept``, ``compare`` and ``nightly`` are plain ``print``. rich is imported
when a table is printed, not with this module.

>>> summary = {"cutoffs": [5], "configs": {"a": {"duplicate_rate": 0.05, "cap_checked": 3,
...            "cap_checked_source": "production", "chunk": {"nDCG@5": 0.5}, "latency_us": {"search": {"p50": 1500.0}},
...            "stage_losses": {"cap": 2}}}}
>>> [row for row in summary_table(summary) if row[1] != ["-"]]  # doctest: +NORMALIZE_WHITESPACE
[('duplicate rate (evidence key)', ['5.0%']), ('cap checked against', ['3 (production)']),
 ('chunk nDCG@5', ['0.500']), ('search latency p50', ['1.50 ms']), ('relevant chunks lost: cap', ['2'])]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_eval.core.config import RagConfig
from rag_eval.experiment import Experiment
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.ingest.collection import IngestResult
from rag_eval.loadtest.document import is_endpoint, measured_on
from rag_eval.metrics.registry import IDENTITY_TABLE, READING_ORDER
from rag_eval.reports.display import budget_note, flatten_config, fmt, measure
from rag_eval.reports.existing import drift_text
from rag_eval.reports.loadtest import load_rows
from rag_eval.reports.summary import EXIT_HEADLINE, gate_rows
from rag_eval.reports.verdict_words import rule_words, verdict_detail, verdict_headline

__all__ = [
    "MEASURES",
    "console_measures",
    "describe_load",
    "describe_run",
    "print_accepted",
    "print_compared",
    "print_embedded",
    "print_gates",
    "print_history",
    "print_ingested",
    "print_inspect",
    "print_load",
    "print_night",
    "print_run",
    "print_settings",
    "summary_table",
]  # fmt: skip

if TYPE_CHECKING:
    import pandas as pd

    from rag_eval.search.milvus.suggest import Inspected

VERDICT_STYLE = {"pass": "green", "warn": "yellow", "underpowered": "yellow", "fail": "bold red", "error": "bold red"}
GATE_COLUMNS = ("gate", "value", "delta", "interval", "verdict")
TABLE_WIDTH = 100  # every table the commands print fits 100 columns
LOAD_COLUMNS = (
    "config", "clients", "QPS", "scaling", "search p50/p95/p99 ms", "e2e p50/p95/p99 ms", "client CPU/process",
    "machine CPU busy",
)  # fmt: skip

MEASURES = IDENTITY_TABLE  # then the standard measures at one cutoff, payload size, latency, losses


def console_measures(k: int) -> list[str]:
    """The measures of the console table, in order, with the standard ones at cutoff ``k``.

    >>> console_measures(5)[len(MEASURES):]  # doctest: +NORMALIZE_WHITESPACE
    ['chunk:nDCG@5', 'chunk:R@5', 'chunk:P@5', 'chunk:RR', 'chunk:Success@5', 'doc:nDCG@5', 'payload:chars_p50',
     'payload:chars_p95', 'latency:search:p50', 'latency:search:p95', 'latency:postprocess:p50']
    """
    standard = [f"chunk:{family}" if family == "RR" else f"chunk:{family}@{k}" for family in READING_ORDER]
    return [
        *MEASURES,
        *standard,
        f"doc:nDCG@{k}",
        "payload:chars_p50",
        "payload:chars_p95",
        "latency:search:p50",
        "latency:search:p95",
        "latency:postprocess:p50",
    ]


def _cap_label(cfg: Mapping[str, Any]) -> str:
    cap = cfg.get("cap_checked")
    if cap is None:
        return "none"
    return str(cap) if cfg.get("cap_checked_source") == "config" else f"{cap} (production)"


def summary_table(summary: Mapping[str, Any], lead: Sequence[int] = ()) -> list[tuple[str, list[str]]]:
    """(measure label, value per config) for printing: the measures of :func:`console_measures` at the
    ``lead`` cutoffs (the measured ones of them; none: 5, else the run's last), then the relevant chunks lost
    at each stage."""
    configs: Mapping[str, Mapping[str, Any]] = summary["configs"]
    names: Sequence[str] = list(configs)
    cutoffs = summary["cutoffs"]
    flats = {n: flatten_config(configs[n]) for n in names}
    rows: list[tuple[str, list[str]]] = []
    leading = [k for k in lead if k in cutoffs] or [5 if 5 in cutoffs else cutoffs[-1]]
    shown = list(MEASURES) + [n for k in leading for n in console_measures(k)[len(MEASURES) :] if n not in MEASURES]
    for name in dict.fromkeys(shown):
        m = measure(name)
        if name == "cap_checked":  # where the cap came from says as much as the cap
            values = [_cap_label(configs[n]) for n in names]
        else:
            values = [fmt(m, flats[n].get(name), none="-", grouping=False) for n in names]
        rows.append((m.label, values))
    for stage in sorted({s for n in names for s in configs[n].get("stage_losses", {})}):
        counts = [str(configs[n].get("stage_losses", {}).get(stage, 0)) for n in names]
        rows.append((measure(f"lost:{stage}").label, counts))
    return rows


# -- a run ------------------------------------------------------------------------------------


def describe_run(exp: Experiment, out: Path) -> str:
    """The settings a run uses, defaults included, in one line for the start of the run."""
    configs = ", ".join(f"{c.name} ({c.config.pipeline.value})" for c in exp.configs)
    if exp.existing is not None:  # a collection built elsewhere: its own chunks, schema and index
        spec = exp.existing
        fields = ", ".join(f"{k}={v}" for k, v in spec.fields.items())
        partitions = f", partitions {', '.join(spec.partitions)}" if spec.partitions else ""
        return (
            f"{exp.name}: data set {exp.dataset_path} (split {exp.split}), embedder {exp.embedder.label}, "
            f"collection {spec.name} at Milvus {exp.target.redacted_uri}, replayed as it is (fields {fields}"
            f"{partitions}; at most {spec.max_unresolved:.1%} of its rows unlocated), configs {configs}, "
            f"baseline {exp.baseline}, queries {exp.query_limit or 'all'}, batches of {exp.batch_size}; "
            f"run directory {out}"
        )
    passage = "" if exp.embedder.passage == "text" else f" ({exp.embedder.passage})"
    chosen = "" if exp.profile_named else " (chosen by the data set)"
    budget = "" if exp.payload_budget else ", payload budget lifted"
    return (
        f"{exp.name}: data set {exp.dataset_path} (split {exp.split}), chunker {exp.chunker_spec}, "
        f"embedder {exp.embedder.label}{passage}, ingest profile {exp.profile.name}{chosen}, Milvus "
        f"{exp.target.redacted_uri} (index {exp.index.index_type}/{exp.index.metric}), configs {configs}, baseline "
        f"{exp.baseline}{budget}, queries {exp.query_limit or 'all'}, batches of {exp.batch_size}; run directory {out}"
    )


def print_run(
    summary: Mapping[str, Any],
    *,
    experiment: str,
    baseline: str,
    gates: Mapping[str, Any] | None,
    out: Path,
    lead: Sequence[int] = (),
) -> None:
    """The run's table (its measures at the ``lead`` cutoffs), its gates (``gates``: the comparison's
    document) and where its files are."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    title = f"{experiment} ({summary['queries']} queries, labels: {summary['label_level']})"
    table = Table(title=escape(title))
    table.add_column("measure")
    for name in summary["configs"]:
        table.add_column(escape(name + (" (baseline)" if name == baseline else "")), justify="right")
    for label, values in summary_table(summary, lead):
        table.add_row(escape(label), *(escape(v) for v in values))
    console = Console(width=TABLE_WIDTH)
    console.print(table)
    if (budget := budget_note(summary)) is not None:
        console.print(f"note: {escape(budget)}", soft_wrap=True)
    moved = drift_text(summary.get("resolution") or {})
    if moved is not None:  # a collection built elsewhere, ingested again since its labels were resolved
        console.print(f"labels moved since the previous resolution (a re-ingest): {escape(moved)}", soft_wrap=True)
    if gates is not None:
        print_gates(gates, console=console)
    console.print(f"report: {escape(str(out / 'report.md'))}")
    console.print(f"html report: {escape(str(out / 'report.html'))}")
    console.print(f"run directory: {escape(str(out))} (compare.json, junit.xml, summary.md)")


def print_gates(document: Mapping[str, Any], *, console: Any = None) -> None:
    """The gate table of a comparison, its notes, and a line per gate that did not pass."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    console = Console(width=TABLE_WIDTH, file=console.file)
    rows = gate_rows(document)
    code = int(document["exit_code"])
    for comparison in document.get("comparisons", []):  # each config's verdict in words, first
        console.print(f"[bold]{escape(verdict_headline(comparison))}[/]", soft_wrap=True)
        console.print(f"  {escape(verdict_detail(comparison))}", soft_wrap=True)
    console.print(f"gates ({escape(str(document['gates_file']))}): {EXIT_HEADLINE.get(code, code)}", soft_wrap=True)
    for config in dict.fromkeys(r["config"] for r in rows):  # a table per compared config, in order
        mine = [r for r in rows if r["config"] == config]
        table = Table(title=escape(f"{config} vs {mine[0]['baseline']}"), box=box.SIMPLE_HEAD, title_justify="left")
        for column in GATE_COLUMNS:
            table.add_column(column, justify="right" if column in ("value", "delta") else "left")
        for r in mine:
            verdict = f"[{VERDICT_STYLE.get(r['outcome'], '')}]{escape(r['verdict'])}[/]"
            gate = f"{r['gate'].split(' for ')[0]}{' (warn)' if r['severity'] == 'warn' else ''}"
            table.add_row(escape(gate), r["value"], r["delta"], r["interval"], verdict)
        console.print(table)
    console.print(escape(rule_words(document)), soft_wrap=True)
    if document.get("gates_purpose"):
        console.print(f"these gates: {escape(str(document['gates_purpose']))}")
    for note in document.get("notes", []):
        console.print(f"note: {escape(note)}")
    for r in rows:
        if r["outcome"] != "pass":
            console.print(f"{escape(r['verdict'])} {escape(r['config'])} {escape(r['gate'])}: {escape(r['message'])}")


def print_compared(paths: Sequence[Path]) -> None:
    print(f"wrote {', '.join(p.name for p in paths)} to {paths[0].parent if paths else '.'}")


def print_night(*, first: bool, night: Path, accepted: Path, history: str | Path) -> None:
    """Where a night went, and that a first night is now the accepted baseline."""
    if first:
        print(f"first night: {night} is now the accepted baseline ({accepted})")
    print(f"night written to {night} (report.md, compare.json, junit.xml, summary.md); history: {history}")


def print_accepted(run_dir: str | Path, target: Path) -> None:
    print(f"{run_dir} is the accepted baseline of its experiment: {target}")


def print_history(frame: pd.DataFrame, path: str | Path) -> None:
    """The trend of the nightly history, a row per night and config (or that there is none)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if frame.empty:
        print(f"no history in {path}")
        return
    table = Table(title=f"history ({escape(str(path))})")
    for column in frame.columns:
        table.add_column(escape(str(column)), justify="left" if frame[column].dtype == object else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(escape(_cell(v)) for v in row))
    Console(width=max(120, 24 * len(frame.columns))).print(table)


def _cell(value: Any) -> str:
    """A history value, short: floats to 4 digits, a commit or checksum to 12 characters, a time to minutes."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    if len(text) >= 32 and all(c in "0123456789abcdef" for c in text):  # a commit or a checksum
        return text[:12]
    return text[:16].replace("T", " ") if len(text) > 19 and text[4:5] == "-" and "T" in text else text


# -- the data and the collection --------------------------------------------------------------


def print_ingested(result: IngestResult) -> None:
    state = "reused" if result.reused else "built"
    print(
        f"{result.collection} at {result.target.redacted_uri}: {state} ({result.reason}), "
        f"{result.rows} rows, {result.embedded} texts embedded, {result.seconds:.1f} s"
    )


def print_inspect(found: Inspected) -> None:
    """``rag-eval inspect``: the collections at a URI, or one collection and a suggested table (the
    collection's own names and values printed as text, never as rich markup)."""
    info, backend, shown_uri, collections = found.info, found.backend, found.target.redacted_uri, found.collections
    samples, suggestion, load_default = found.samples, found.suggestion, found.load_default
    from rich.console import Console

    from rag_eval.reports.existing import inspect_lines

    console = Console(width=200, highlight=False)
    if info is None:
        count = f"{len(collections)} collection{'' if len(collections) == 1 else 's'}"
        console.print(f"{shown_uri} ({backend}): {count}", markup=False)
        for name in collections:
            console.print(f"  {name}", markup=False)
        return
    lines = inspect_lines(info, shown_uri=shown_uri, backend=backend, samples=samples, suggestion=suggestion,
                          load_default=load_default)  # fmt: skip
    for line in lines:
        console.print(line, markup=False)


def print_embedded(files: Sequence[Path], written: Sequence[Path], embedded: int) -> None:
    state = ", ".join(f"{p} {'written' if p in written else 'unchanged'}" for p in files)
    print(f"{state} ({embedded} texts embedded, the rest stored already)")


def print_settings(settings: Experiment | RagConfig, path: Path) -> None:
    """The effective settings of a config file, or of each config of an experiment file."""
    if isinstance(settings, Experiment):
        configs = len(settings.configs)
        print(f"# {path} is an experiment file ({settings.name!r}, {configs} configs); each config's settings:")
        for spec in settings.configs:
            note = f", what-if {spec.what_if}" if spec.what_if else ""
            print(f"\n[{spec.name}]  (mode {spec.mode.value}{note}; from {spec.origin})")
            _print_properties(spec.config)
    else:
        _print_properties(settings)


def _print_properties(config: RagConfig) -> None:
    print(properties_text(config), end="")


def properties_text(config: RagConfig) -> str:
    r"""The config as a ``.properties`` file that reads back as the same config: every key its pipeline
    uses, with its effective value, and as comments what follows from them (a legacy pipeline takes one
    width, ``rag.top-k``, and no cap, so those keys would be refused there).

    >>> print(properties_text(RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": "5"})), end="")
    rag.pipeline=legacy-merge
    rag.top-k=5
    # retrieve-k and return-n: 5, from rag.top-k; no per-document cap (legacy-merge has none)
    rag.projector.max-blocks=8
    rag.projector.max-excerpt-chars=2000
    rag.projector.max-total-chars=12000
    """
    lines = [f"rag.pipeline={config.pipeline.value}"]
    if config.pipeline.is_legacy:
        source = "from rag.top-k" if config.top_k is not None else "the default width (rag.top-k unset)"
        if config.top_k is not None:
            lines.append(f"rag.top-k={config.top_k}")
        lines.append(f"# retrieve-k and return-n: {config.retrieve_k}, {source}; no per-document cap "
                     f"({config.pipeline.value} has none)")  # fmt: skip
    else:
        if config.top_k is not None:
            lines.append(f"rag.top-k={config.top_k}")
        lines += [f"rag.retrieve-k={config.retrieve_k}", f"rag.return-n={config.return_n}",
                  f"rag.max-chunks-per-document={config.max_chunks_per_document}"]  # fmt: skip
    if config.category_filter is not None:
        lines.append(f"rag.category-filter={_escaped(config.category_filter)}")
    lines += [f"rag.projector.max-blocks={config.max_blocks}",
              f"rag.projector.max-excerpt-chars={config.max_excerpt_chars}",
              f"rag.projector.max-total-chars={config.max_total_chars}"]  # fmt: skip
    return "".join(f"{line}\n" for line in lines)


def _escaped(value: str) -> str:
    """A value as Java's Properties.load reads it back exactly (leading blanks, backslashes, non-ASCII)."""
    import javaproperties

    return str(javaproperties.escape(value))


# -- latency under load -----------------------------------------------------------------------


def describe_load(exp: Experiment, settings: LoadSettings, out: Path, *, endpoint: str | None = None) -> str:
    """What a load measurement will do, in one line for its start (``endpoint``: a served one, redacted)."""
    where = f"the served endpoint {endpoint}" if endpoint else f"Milvus {exp.target.redacted_uri}"
    return (
        f"load: {exp.name} on {where}, clients {list(settings.concurrency)}, "
        f"{settings.duration_s:g} s per config and level in {settings.rounds} rounds"
        + (f", at most {settings.max_searches} lookups" if settings.max_searches else "")
        + f"; output {out}"
    )


def print_load(doc: Mapping[str, Any], out: Path) -> None:
    """The load table (a row per config and client count), its notes, and where the files went."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    machine_load = doc["machine_load"]
    title = (
        f"latency under load: {doc['experiment']} ({measured_on(doc)}, {doc['machine']['cpus']} CPUs, load average "
        f"{machine_load['loadavg_start']} -> {machine_load['loadavg_end']})"
    )
    table = Table(title=escape(title))
    served = is_endpoint(doc)  # a served endpoint's requests can fail: counted in a column of their own
    for column in (*LOAD_COLUMNS, "errors/timeouts") if served else LOAD_COLUMNS:
        table.add_column(column, justify="left" if column == "config" else "right")
    for r in load_rows(doc):
        table.add_row(
            escape(r["config"]), str(r["clients"]), r["qps"], r["scaling"],
            f"{r['search_p50']}/{r['search_p95']}/{r['search_p99']}", f"{r['e2e_p50']}/{r['e2e_p95']}/{r['e2e_p99']}",
            r["client_cpu"], r["machine_busy"], *((r["failed"],) if served else ()),
        )  # fmt: skip
    console = Console(width=150)
    console.print(table)
    for note in doc.get("notes", []):
        console.print(f"note: {escape(note)}")
    console.print(f"wrote load.json, load.md and load_requests.parquet to {escape(str(out))}")
    if (doc.get("run") or {}).get("started"):
        console.print(
            f"the run's report.html now shows the curve; apply load gates with: rag-eval compare {escape(str(out))}"
        )
