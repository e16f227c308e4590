"""Command line: argument parsing and exit codes only; the work is done elsewhere.

Exit codes: 0 pass, 1 gate failed (regression), 2 usage or input error (one line, no
traceback), 3 infrastructure error (Milvus unreachable, disk). Anything else is a
bug and shows its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_eval.core.errors import InfrastructureError, InputError

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INPUT = 2
EXIT_INFRA = 3

Command = Callable[[argparse.Namespace], int]


def _cmd_config(args: argparse.Namespace) -> int:
    from rag_eval.core.config import RagConfig

    path = Path(args.file)
    if path.suffix == ".toml":
        text = _read_text(path)
        config = RagConfig.from_toml_text(text, source=str(path))
    else:
        config = RagConfig.from_properties_file(path)
    for key, value in sorted(config.as_properties().items()):
        print(f"{key}={value}")
    return EXIT_OK


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
        f"{result.collection} at {exp.as_dict()['milvus']['uri']}: {state} ({result.reason}), "
        f"{result.rows} rows, {result.embedded} texts embedded, {result.seconds:.1f} s"
    )
    return EXIT_OK


def _cmd_embed(args: argparse.Namespace) -> int:
    from rag_eval import jobs
    from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC
    from rag_eval.embed.embedders import DEFAULT_MODEL

    progress = jobs.Progress(quiet=args.quiet)
    with progress.running():
        chunks, queries, embedded = jobs.embed_dataset(
            args.dataset,
            chunker=args.chunker or DEFAULT_CHUNKER_SPEC,
            split=args.split or "test",
            model=args.model or DEFAULT_MODEL,
            normalize=True,
            cache_dir=Path(args.cache_dir),
            progress=progress,
        )
    print(f"wrote {chunks} and {queries} ({embedded} texts embedded, the rest from the cache)")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from rag_eval import jobs

    exp = _experiment(args)
    out = Path(args.out) if args.out else Path("reports") / "runs" / exp.name
    progress = jobs.Progress(quiet=args.quiet)
    with progress.running():
        result = jobs.run_experiment(exp, out, resume=args.resume, progress=progress)
    table = Table(title=f"{exp.name} ({result.summary['queries']} queries, labels: {result.summary['label_level']})")
    table.add_column("measure")
    for name in result.summary["configs"]:
        table.add_column(name + (" (baseline)" if name == exp.baseline else ""), justify="right")
    for label, values in jobs.summary_table(result.summary):
        table.add_row(label, *values)
    console = Console(width=max(100, 40 + 22 * len(result.summary["configs"])))
    console.print(table)
    console.print(f"report: {result.report}")
    console.print(f"run directory: {result.out}")
    return EXIT_OK


def _add_experiment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", nargs="?", help="experiment TOML file (optional with --dataset)")
    p.add_argument("--dataset", help="BEIR data set directory (overrides the experiment's)")
    p.add_argument("--split", help="qrels split (default: the experiment's, else test)")
    p.add_argument("--milvus-uri", help="a local path (embedded Milvus Lite) or http(s)://host:port (a server)")
    p.add_argument("--collection", help="collection name (default: derived from the data set and its manifest)")
    p.add_argument("--chunker", help="chunker spec, e.g. sentences:size=3,overlap=0 or chars:size=800,overlap=100")
    p.add_argument("--profile", help="ingest profile: clean or production")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


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
    p.add_argument("--out", help="run directory (default reports/runs/<experiment>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME=FILE[:MODE]",
        help="a config from a .properties file (repeatable; replaces the experiment's configs)",
    )
    p.add_argument("--baseline", help="name of the baseline config")
    p.add_argument("--limit", type=int, help="replay only the first N queries")
    p.add_argument(
        "--latency",
        metavar="all|sample[:N]|off",
        help="which queries get their search timed, serially (default: the experiment's [timing], "
        "else a sample of 1,000 with seed 0; every query when there are fewer)",
    )
    p.set_defaults(func=_cmd_run)

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
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
