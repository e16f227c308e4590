"""Command line: argument parsing and exit codes only; the work is done elsewhere.

Exit codes: 0 pass (warnings and underpowered checks included), 1 a fail gate fired (a
regression) and nothing else, 2 usage or input error (one line, no traceback), 3
infrastructure error (Milvus unreachable, disk), 70 a bug (its traceback is printed;
sysexits' EX_SOFTWARE), 130 interrupted. A crash never exits 1, so a CI job cannot read it
as a regression.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_eval.core.errors import InfrastructureError, InputError

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INPUT = 2
EXIT_INFRA = 3
EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug, never to be read as a regression (1)
EXIT_INTERRUPTED = 130

Command = Callable[[argparse.Namespace], int]


def _cmd_config(args: argparse.Namespace) -> int:
    from rag_eval.core.config import RagConfig

    path = Path(args.file)
    if path.suffix == ".toml":
        text = _read_text(path)
        if _is_experiment(text):
            from rag_eval.harness.experiment import load_experiment

            exp = load_experiment(path)
            print(f"# {path} is an experiment file ({exp.name!r}, {len(exp.configs)} configs); each config's settings:")
            for spec in exp.configs:
                note = f", what-if {spec.what_if}" if spec.what_if else ""
                print(f"\n[{spec.name}]  (mode {spec.mode.value}{note}; from {spec.origin})")
                for key, value in sorted(spec.config.as_properties().items()):
                    print(f"{key}={value}")
            return EXIT_OK
        config = RagConfig.from_toml_text(text, source=str(path))
    else:
        config = RagConfig.from_properties_file(path)
    from rag_eval.search.milvus.schema import MAX_TOPK

    if config.retrieve_k > MAX_TOPK:
        from rag_eval.core.errors import ConfigError, ConfigProblem

        key = "rag.retrieve-k" if "rag.retrieve-k" in text_of(path) else "rag.top-k"
        raise ConfigError(
            [ConfigProblem(key, f"{config.retrieve_k:,} is over Milvus's limit of {MAX_TOPK:,} hits per search")],
            path=str(path),
        )
    for key, value in sorted(config.as_properties().items()):
        print(f"{key}={value}")
    return EXIT_OK


def text_of(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _usage(key: str, message: str) -> Exception:
    from rag_eval.core.errors import ConfigError, ConfigProblem

    return ConfigError([ConfigProblem(key, message)])


def _is_experiment(text: str) -> bool:
    """A TOML text with experiment tables (``[experiment]``, ``[dataset]`` or ``[[configs]]``)."""
    import tomllib

    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return bool({"experiment", "dataset", "configs"} & set(table))


def _experiment(args: argparse.Namespace) -> Any:
    """The experiment of a file, or of flags alone, with the CLI flags applied on top."""
    from rag_eval.harness.experiment import default_experiment, load_experiment, parse_config_flag, with_overrides

    if args.experiment:
        exp = load_experiment(args.experiment)
    elif args.dataset:
        exp = default_experiment(args.dataset, args.split or "test")
    else:
        from rag_eval.core.errors import ConfigError, ConfigProblem

        raise ConfigError([ConfigProblem("EXPERIMENT", "give an experiment file or --dataset DIR")])
    configs = [parse_config_flag(c) for c in getattr(args, "config", None) or ()]
    return with_overrides(
        exp,
        dataset=args.dataset if args.experiment else None,
        split=args.split,
        milvus_uri=args.milvus_uri,
        collection=args.collection,
        chunker=args.chunker,
        profile=args.profile,
        configs=configs,
        baseline=getattr(args, "baseline", None),
        query_limit=getattr(args, "limit", None),
        latency=getattr(args, "latency", None),
        require_configs=args.func is not _cmd_ingest,
    )


def _cmd_ingest(args: argparse.Namespace) -> int:
    from rag_eval import jobs

    exp = _experiment(args)
    progress = jobs.Progress(quiet=args.quiet)
    with progress.running():
        result = jobs.ingest(exp, force=args.force, progress=progress)
    state = "reused" if result.reused else "built"
    print(
        f"{result.collection} at {result.target.redacted_uri}: {state} ({result.reason}), "
        f"{result.rows} rows, {result.embedded} texts embedded, {result.seconds:.1f} s"
    )
    return EXIT_OK


def _cmd_embed(args: argparse.Namespace) -> int:
    from rag_eval import jobs
    from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC
    from rag_eval.embed.embedders import DEFAULT_MODEL

    progress = jobs.Progress(quiet=args.quiet)
    with progress.running():
        chunks, queries, embedded, written = jobs.embed_dataset(
            args.dataset,
            chunker=args.chunker or DEFAULT_CHUNKER_SPEC,
            split=args.split or "test",
            model=args.model or DEFAULT_MODEL,
            normalize=True,
            cache_dir=Path(args.cache_dir),
            progress=progress,
        )
    state = ", ".join(f"{p} {'written' if p in written else 'unchanged'}" for p in (chunks, queries))
    print(f"{state} ({embedded} texts embedded, the rest stored already)")
    return EXIT_OK


def _gates(args: argparse.Namespace) -> Any:
    from rag_eval.compare.gates import load_gates

    return load_gates(args.gates) if getattr(args, "gates", None) else None


def _print_gates(document: dict[str, Any], *, console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rag_eval.reports.summary import EXIT_HEADLINE, gate_rows

    console = console or Console()
    console = Console(width=max(console.width, 150), file=console.file)
    rows = gate_rows(document)
    code = int(document["exit_code"])
    table = Table(title=f"gates ({escape(str(document['gates_file']))}): {EXIT_HEADLINE.get(code, code)}")
    for column in ("config", "vs", "gate", "severity", "value", "delta", "interval", "verdict"):
        table.add_column(column, justify="right" if column in ("value", "delta") else "left")
    style = {"pass": "green", "warn": "yellow", "underpowered": "yellow", "fail": "bold red", "error": "bold red"}
    for r in rows:
        verdict = f"[{style.get(r['outcome'], '')}]{escape(r['verdict'])}[/]"
        table.add_row(
            escape(r["config"]), escape(r["baseline"]), escape(r["gate"]), r["severity"], r["value"], r["delta"],
            r["interval"], verdict,
        )  # fmt: skip
    console.print(table)
    for note in document.get("notes", []):
        console.print(f"note: {escape(note)}")
    for r in rows:
        if r["outcome"] != "pass":
            console.print(f"{escape(r['verdict'])} {escape(r['config'])} {escape(r['gate'])}: {escape(r['message'])}")


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rag_eval import jobs
    from rag_eval.reports.console import summary_table

    cluster = _cluster(args)
    exp = _experiment(args)
    gates = _gates(args)
    if args.out:
        out = Path(args.out)
    elif args.resume:
        raise _usage("--resume", "give the --out of the run to resume")
    else:  # a new directory per run: a later run never overwrites an earlier one
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        out = Path("reports") / "runs" / f"{exp.name}-{stamp}"
    progress = jobs.Progress(quiet=args.quiet)
    progress.log(jobs.describe(exp, out))
    with progress.running():
        result = jobs.run_experiment(
            exp, out, resume=args.resume, progress=progress, gates=gates, against=args.against,
            intersection=args.intersection, cluster=cluster,
        )  # fmt: skip
    title = f"{exp.name} ({result.summary['queries']} queries, labels: {result.summary['label_level']})"
    table = Table(title=escape(title))
    table.add_column("measure")
    for name in result.summary["configs"]:
        table.add_column(escape(name + (" (baseline)" if name == exp.baseline else "")), justify="right")
    for label, values in summary_table(result.summary):
        table.add_row(escape(label), *(escape(v) for v in values))
    console = Console(width=max(100, 40 + 22 * len(result.summary["configs"])))
    console.print(table)
    if result.comparison is not None:
        _print_gates(result.comparison.document, console=console)
    console.print(f"report: {escape(str(result.report))}")
    console.print(f"html report: {escape(str(result.out / 'report.html'))}")
    console.print(f"run directory: {escape(str(result.out))} (compare.json, junit.xml, summary.md)")
    return result.exit_code


def _cluster(args: argparse.Namespace) -> Any:
    """The Dask cluster of ``--workers`` / ``--scheduler`` / ``--parts`` (None: replay in this process)."""
    if args.workers is None and args.scheduler is None:
        if args.parts is not None:
            raise _usage("--parts", "give --workers N or --scheduler ADDRESS with it")
        return None
    from rag_eval.harness import distributed

    if args.workers is not None and args.scheduler is not None:
        raise _usage("--workers", "give --workers N (local processes) or --scheduler ADDRESS, not both")
    return distributed.Cluster(
        workers=distributed.parse_workers(args.workers) if args.workers is not None else None,
        scheduler=distributed.parse_scheduler(args.scheduler) if args.scheduler is not None else None,
        parts_url=distributed.check_parts_url(args.parts) if args.parts is not None else None,
    )


def _add_cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workers", metavar="N",
        help="replay the query batches in N local worker processes (Dask); the rows are a serial run's",
    )  # fmt: skip
    p.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="replay the query batches on the workers of this Dask scheduler (tcp://host:8786)",
    )  # fmt: skip
    p.add_argument(
        "--parts", metavar="URL",
        help="where the workers write finished batches: a directory or fsspec URL they reach (default: the run "
        "directory's .parts)",
    )  # fmt: skip


def _cmd_compare(args: argparse.Namespace) -> int:
    from rag_eval import jobs

    comparison = jobs.compare_runs(
        args.run_dir, against=args.against, gates=args.gates, out=args.out, intersection=args.intersection
    )
    _print_gates(comparison.document)
    print(f"wrote compare.json, junit.xml and summary.md to {args.out or args.run_dir}")
    return comparison.exit_code


def _cmd_accept(args: argparse.Namespace) -> int:
    from rag_eval.compare.history import accept

    target = accept(args.run_dir, root=args.accepted_dir)
    print(f"{args.run_dir} is the accepted baseline of its experiment: {target}")
    return EXIT_OK


def _cmd_history(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rag_eval.compare.history import DEFAULT_TREND, read_history, trend

    frame = trend(
        read_history(args.history),
        metrics=args.metric or DEFAULT_TREND,
        last=args.last,
        config=args.config_name,
        experiment=args.experiment_name,
    )
    if frame.empty:
        print(f"no history in {args.history}")
        return EXIT_OK
    table = Table(title=f"history ({escape(str(args.history))})")
    for column in frame.columns:
        table.add_column(escape(str(column)), justify="left" if frame[column].dtype == object else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(escape(_cell(v)) for v in row))
    Console(width=max(120, 24 * len(frame.columns))).print(table)
    return EXIT_OK


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    if len(text) >= 32 and all(c in "0123456789abcdef" for c in text):  # a commit or a checksum
        return text[:12]
    return text[:16].replace("T", " ") if len(text) > 19 and text[4:5] == "-" and "T" in text else text


def _cmd_nightly(args: argparse.Namespace) -> int:
    from rag_eval import jobs

    cluster = _cluster(args)
    exp = _experiment(args)
    progress = jobs.Progress(quiet=args.quiet)
    with progress.running():
        night = jobs.nightly(
            exp, root=args.root, accepted_root=args.accepted_dir, history=args.history, gates=_gates(args),
            progress=progress, cluster=cluster,
        )  # fmt: skip
    if night.run.comparison is not None:
        _print_gates(night.run.comparison.document)
    if night.first:
        print(f"first night: {night.dir} is now the accepted baseline ({night.accepted})")
    print(f"night written to {night.dir} (report.md, compare.json, junit.xml, summary.md); history: {args.history}")
    return night.exit_code


def _cmd_load(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rag_eval import jobs
    from rag_eval.harness.load_settings import LoadSettings, with_flags
    from rag_eval.reports.load import load_rows

    exp = _experiment(args)
    settings = with_flags(
        exp.load or LoadSettings(), concurrency=args.concurrency, duration=args.duration,
        max_searches=args.max_searches, rounds=args.rounds, warmup=args.warmup,
        configs=[c.strip() for c in args.configs.split(",")] if args.configs is not None else None,
        known_configs=[c.name for c in exp.configs],
    )  # fmt: skip
    if args.out:
        out = Path(args.out)
    else:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        out = Path("reports") / "load" / f"{exp.name}-{stamp}"
    progress = jobs.Progress(quiet=args.quiet)
    progress.log(
        f"load: {exp.name} on Milvus {exp.target.redacted_uri}, clients {list(settings.concurrency)}, "
        f"{settings.duration_s:g} s per config and level in {settings.rounds} rounds"
        + (f", at most {settings.max_searches} lookups" if settings.max_searches else "")
        + f"; output {out}"
    )
    with progress.running():
        result = jobs.load(exp, out, settings=settings, progress=progress)
    doc = result.document
    machine_load = doc["machine_load"]
    title = (
        f"latency under load: {doc['experiment']} (Milvus {doc['milvus']['backend']} "
        f"{doc['milvus']['server_version']}, {doc['machine']['cpus']} CPUs, load average "
        f"{machine_load['loadavg_start']} -> {machine_load['loadavg_end']})"
    )
    table = Table(title=escape(title))
    columns = ("config", "clients", "QPS", "scaling", "search p50/p95/p99 ms", "e2e p50/p95/p99 ms",
               "client CPU/process", "machine CPU busy")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "config" else "right")
    for r in load_rows(doc):
        table.add_row(
            escape(r["config"]), str(r["clients"]), r["qps"], r["scaling"],
            f"{r['search_p50']}/{r['search_p95']}/{r['search_p99']}", f"{r['e2e_p50']}/{r['e2e_p95']}/{r['e2e_p99']}",
            r["client_cpu"], r["machine_busy"],
        )  # fmt: skip
    console = Console(width=150)
    console.print(table)
    for note in doc.get("notes", []):
        console.print(f"note: {escape(note)}")
    belongs = bool((doc.get("run") or {}).get("started"))
    console.print(f"wrote load.json, load.md and load_requests.parquet to {escape(str(out))}")
    if belongs:
        console.print(
            f"the run's report.html now shows the curve; apply load gates with: rag-eval compare {escape(str(out))}"
        )
    return EXIT_OK


def _add_experiment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", nargs="?", help="experiment TOML file (optional with --dataset)")
    p.add_argument("--dataset", help="BEIR data set directory (overrides the experiment's)")
    p.add_argument("--split", help="qrels split (default: the experiment's, else test)")
    p.add_argument(
        "--milvus-uri",
        help="a local path (embedded Milvus Lite) or http(s)://host:port (a server); default: the experiment's, "
        "else reports/milvus/<data set>.db",
    )
    p.add_argument("--collection", help="collection name (default: derived from the data set and its manifest)")
    p.add_argument(
        "--chunker",
        help="chunker spec, e.g. sentences:size=3,overlap=0 or chars:size=800,overlap=100; default: the "
        "experiment's, else sentences:size=3,overlap=0",
    )
    p.add_argument(
        "--profile", help="ingest profile: clean or production (default: the experiment's, else production)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _add_gate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gates", help="gates file, or a shipped one: default, nightly (default: the experiment's)")
    p.add_argument(
        "--intersection", action="store_true", help="pair runs over different data or queries on what they share"
    )


def _read_text(path: Path) -> str:
    from rag_eval.core.errors import ConfigError, ConfigProblem

    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([ConfigProblem("(file)", f"cannot read: {exc.strerror}")], path=str(path)) from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-eval",
        description="Replay labelled queries against Milvus through the RAG post-processing pipeline, "
        "measure, compare and gate configs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("config", help="validate a RagConfig (.properties or .toml) and print the effective settings")
    p.add_argument("file", help="a production .properties file, or a TOML file with a [rag] table")
    p.set_defaults(func=_cmd_config)

    p = sub.add_parser("ingest", help="chunk, embed and write a data set into Milvus (reused when unchanged)")
    _add_experiment_args(p)
    p.add_argument("--force", action="store_true", help="rebuild the collection even when its manifest matches")
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("run", help="replay the labelled queries under every config and write the run directory")
    _add_experiment_args(p)
    p.add_argument("--out", help="run directory (default: a new reports/runs/<experiment>-<UTC time>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME=FILE[:MODE]",
        help="a config from a .properties file (repeatable; replaces the experiment's configs)",
    )
    p.add_argument("--baseline", help="name of the baseline config (default: the experiment's, else the first)")
    p.add_argument("--limit", type=int, help="replay only the first N queries (default: all)")
    p.add_argument(
        "--latency",
        metavar="all|sample[:N]|off",
        help="which queries get their search timed, serially (default: the experiment's [timing], "
        "else a sample of 1,000 with seed 0; every query when there are fewer)",
    )
    _add_gate_args(p)
    p.add_argument("--against", help="compare with this earlier run directory instead of within the run")
    _add_cluster_args(p)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("compare", help="compare run directories and apply the gates (reads run directories only)")
    p.add_argument("run_dir", help="a run directory (per_query.parquet, summary.json, manifest.json)")
    p.add_argument("--against", help="another run directory: every config against the same-named config there")
    _add_gate_args(p)
    p.add_argument("--out", help="where compare.json, junit.xml and summary.md go (default: RUN_DIR)")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("accept", help="make a run the accepted baseline of its experiment (later nights pair with it)")
    p.add_argument("run_dir", help="a run directory")
    p.add_argument("--accepted-dir", default="reports/accepted", help="where accepted baselines are kept")
    p.set_defaults(func=_cmd_accept)

    p = sub.add_parser("history", help="print the trend of the nightly history")
    p.add_argument("--history", default="reports/history.parquet", help="the history file")
    p.add_argument("--metric", action="append", help="a metric column (repeatable; default: a few key ones)")
    p.add_argument("--last", type=int, help="the last N rows of each config")
    p.add_argument("--config", dest="config_name", help="one config only")
    p.add_argument("--experiment", dest="experiment_name", help="one experiment only")
    p.set_defaults(func=_cmd_history)

    p = sub.add_parser("nightly", help="run, compare with the accepted baseline, gate, and append to the history")
    _add_experiment_args(p)
    p.add_argument("--gates", help="gates file or shipped name (default: the experiment's, else default)")
    p.add_argument("--root", default="reports/nightly", help="nights are written to ROOT/<UTC date>/")
    p.add_argument("--accepted-dir", default="reports/accepted", help="where accepted baselines are kept")
    p.add_argument("--history", default="reports/history.parquet", help="the history file")
    _add_cluster_args(p)
    p.set_defaults(func=_cmd_nightly)

    p = sub.add_parser(
        "load",
        help="latency under concurrent load on a Milvus server: QPS and p50/p95/p99 per client count and config",
    )
    _add_experiment_args(p)
    p.add_argument(
        "--concurrency", metavar="N[,N...]",
        help="client processes per level, each with its own Milvus client (default: the experiment's [load], "
        "else 1,2,4,8; at most 64)",
    )  # fmt: skip
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="seconds per config and level (default: [load], else 10; at most 600)")  # fmt: skip
    p.add_argument("--max-searches", type=int, metavar="N", help="at most N lookups per config and level")
    p.add_argument(
        "--rounds", type=int, metavar="R",
        help="windows per config and level, configs alternating (default: [load], else 5; 2..20)",
    )  # fmt: skip
    p.add_argument("--warmup", type=int, metavar="N", help="unrecorded lookups per process and config (default 5)")
    p.add_argument("--configs", metavar="NAME[,NAME...]", help="the configs to load (default: all)")
    p.add_argument("--limit", type=int, help="replay only the first N queries (default: all)")
    p.add_argument(
        "--out",
        help="where load.json goes: a finished run directory (its report then shows the curve and its gates can "
        "hold it) or a new directory (default: a new reports/load/<experiment>-<UTC time>)",
    )
    p.set_defaults(func=_cmd_load)

    p = sub.add_parser("embed", help="write a data set's precomputed vectors (needs the embed extra)")
    p.add_argument("dataset", help="BEIR data set directory; vectors go to DATASET/vectors/")
    p.add_argument("--chunker", help="chunker spec (default: the project default)")
    p.add_argument("--split", help="qrels split (default test)")
    p.add_argument("--model", help="sentence-transformers model (default all-MiniLM-L6-v2)")
    p.add_argument("--cache-dir", default="reports/cache/embeddings", help="embedding cache directory")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_embed)

    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rag-eval")
    except PackageNotFoundError:
        return "0+unknown"


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    if hasattr(signal, "SIGXFSZ"):  # a file-size limit (ulimit -f) fails the write (exit 3), not the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_INPUT
    try:
        return func(args)
    except InputError as exc:
        print(f"rag-eval: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except InfrastructureError as exc:
        print(f"rag-eval: infrastructure error: {exc}", file=sys.stderr)
        return EXIT_INFRA
    except KeyboardInterrupt:
        print(
            "rag-eval: interrupted; finished query batches are kept: run the same command with --resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except OSError as exc:  # disk full, permissions, a vanished directory: the environment, not the input
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"rag-eval: infrastructure error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_INFRA
    except Exception:  # a bug: never let it read as a failed gate (exit 1)
        traceback.print_exc()
        print(f"rag-eval: internal error (a bug; exit code {EXIT_INTERNAL}): please report it", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
