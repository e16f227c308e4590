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
        print("rag-eval: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
