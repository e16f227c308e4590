"""Command line: argument parsing and exit codes only; the jobs (:mod:`rag_eval.jobs`) do the work and
the reports' console module (:mod:`rag_eval.reports.console`) prints what they return.

Exit codes: 0 pass (warnings and underpowered checks included), 1 a fail gate fired (a regression) and
nothing else, 2 usage or input error (one line, no traceback), 3 infrastructure error (Milvus unreachable,
disk), 70 a bug (its traceback is printed; sysexits' EX_SOFTWARE), 130 interrupted. A crash never exits 1,
so a CI job cannot read it as a regression.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_eval.core.errors import InfrastructureError, InputError
from rag_eval.rundir import folders
from rag_eval.serve.command import serve_command

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INPUT = 2
EXIT_INFRA = 3
EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug, never to be read as a regression (1)
EXIT_INTERRUPTED = 130

Command = Callable[[argparse.Namespace], int]


def _usage(key: str, message: str) -> Exception:
    from rag_eval.core.errors import ConfigError, ConfigProblem

    return ConfigError([ConfigProblem(key, message)])


def _experiment(args: argparse.Namespace) -> Any:
    """The experiment of a file, or of flags alone, with the CLI flags applied on top."""
    from rag_eval.experiment import Overrides, default_experiment, load_experiment, parse_config_flag, with_overrides

    if args.experiment:
        exp = load_experiment(args.experiment)
    elif args.dataset:
        exp = default_experiment(args.dataset, args.split or "test")
    else:
        raise _usage("EXPERIMENT", "give an experiment file or --dataset DIR")
    configs = [parse_config_flag(c) for c in getattr(args, "config", None) or ()]
    return with_overrides(
        exp, Overrides(dataset=args.dataset if args.experiment else None, split=args.split,
        milvus_uri=args.milvus_uri, collection=args.collection,
        chunker=args.chunker, profile=args.profile, configs=configs,
        baseline=getattr(args, "baseline", None),
        query_limit=getattr(args, "limit", None), latency=getattr(args, "latency", None),
        cutoffs=getattr(args, "cutoffs", None) or (), traffic=getattr(args, "traffic", None),
        require_configs=args.func is not _cmd_ingest))


def _gates(args: argparse.Namespace) -> Any:
    from rag_eval.compare.gates import load_gates

    return load_gates(args.gates) if getattr(args, "gates", None) else None


def _out(args: argparse.Namespace, root: Path, name: str) -> Path:
    """``--out``, else a new ``ROOT/<name>-<UTC time>``: a later run never overwrites an earlier one."""
    return Path(args.out) if args.out else folders.stamped_dir(root, name)


def _progress(args: argparse.Namespace) -> Any:
    from rag_eval.replay.prepare import Progress

    return Progress(quiet=args.quiet)


# -- the commands ------------------------------------------------------------------------------


def _cmd_config(args: argparse.Namespace) -> int:
    from rag_eval.experiment import read_settings
    from rag_eval.reports.console import print_settings

    path = Path(args.file)
    print_settings(read_settings(path), path)
    return EXIT_OK


def _cmd_ingest(args: argparse.Namespace) -> int:
    from rag_eval import jobs
    from rag_eval.reports.console import print_ingested

    exp = _experiment(args)
    progress = _progress(args)
    with progress.running():
        result = jobs.ingest(exp, force=args.force, progress=progress)
    print_ingested(result)
    return EXIT_OK


def _cmd_embed(args: argparse.Namespace) -> int:
    from rag_eval import jobs
    from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC
    from rag_eval.embed.embedders import DEFAULT_MODEL, EmbedderSpec
    from rag_eval.reports.console import print_embedded

    progress = _progress(args)
    with progress.running():
        chunks, queries, embedded, written = jobs.embed_dataset(
            args.dataset,
            chunker=args.chunker or DEFAULT_CHUNKER_SPEC,
            split=args.split or "test",
            spec=EmbedderSpec(model=args.model or DEFAULT_MODEL, normalize=True),
            cache_dir=Path(args.cache_dir),
            progress=progress,
        )
    print_embedded((chunks, queries), written, embedded)
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from rag_eval import cli_flags, jobs
    from rag_eval.reports.console import describe_run, print_run

    cluster = _cluster(args)
    exp = _experiment(args)
    gates = _gates(args)
    if args.resume and not args.out:
        raise _usage("--resume", "give the --out of the run to resume")
    out = _out(args, folders.RUNS, exp.name)
    progress = _progress(args)
    progress.log(describe_run(exp, out))
    try:
        with progress.running():
            result = jobs.run_experiment(
                exp, out,
                jobs.Execution(progress=progress, cluster=cluster, resume=args.resume, force_out=args.force_out),
                jobs.Judging(gates=gates, **cli_flags.pairing(args)),
            )  # fmt: skip
    except KeyboardInterrupt:
        raise Interrupted(_resume_advice(out, given=bool(args.out))) from None
    gate_document = result.comparison.document if result.comparison is not None else None
    print_run(result.summary, experiment=exp.name, baseline=exp.baseline, gates=gate_document, out=result.out,
              lead=exp.leading_cutoffs)  # fmt: skip
    return result.exit_code


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what to do about it (printed in place of the general line)."""

    def __init__(self, advice: str) -> None:
        super().__init__(advice)
        self.advice = advice


def _resume_advice(out: Path, *, given: bool) -> str:
    """``--resume`` only when ``out`` holds an unfinished run to resume (a stamped directory: with its --out)."""
    from rag_eval.rundir.directory import RunStore

    if not RunStore(out).resumable():
        return "interrupted before a query batch was kept: nothing to resume; run the command again"
    if given:
        return "interrupted; finished query batches are kept: run the same command with --resume"
    return f"interrupted; finished query batches are kept in {out}: run the command again with --out {out} --resume"


def _cluster(args: argparse.Namespace) -> Any:
    """The Dask cluster of ``--workers`` / ``--scheduler`` / ``--parts`` (None: run in this process)."""
    from rag_eval.cluster.settings import cluster_of

    return cluster_of(workers=args.workers, scheduler=args.scheduler, parts=getattr(args, "parts", None))


def _cmd_compare(args: argparse.Namespace) -> int:
    from rag_eval import cli_flags, jobs
    from rag_eval.compare.gates import load_gates
    from rag_eval.reports.console import print_compared, print_gates

    gates = load_gates(args.gates) if args.gates is not None else None  # named before the runs are read
    judged = jobs.Judging(gates=gates, **cli_flags.pairing(args))
    how = jobs.Execution(force_out=args.force_out, cluster=_cluster(args))
    comparison = jobs.compare_runs(args.run_dir, judged, out=args.out, how=how)
    print_gates(comparison.document)
    print_compared(jobs.comparison_paths(args.run_dir, against=args.against, out=args.out))
    return comparison.exit_code


def _cmd_accept(args: argparse.Namespace) -> int:
    from rag_eval.compare.history import accept
    from rag_eval.reports.console import print_accepted

    print_accepted(args.run_dir, accept(args.run_dir, root=args.accepted_dir, force=args.force))
    return EXIT_OK


def _cmd_history(args: argparse.Namespace) -> int:
    from rag_eval.compare.history import read_history, trend
    from rag_eval.reports.console import print_history

    frame = trend(
        read_history(args.history),
        metrics=args.metric,
        last=args.last,
        config=args.config_name,
        experiment=args.experiment_name,
    )
    print_history(frame, args.history)
    return EXIT_OK


def _cmd_nightly(args: argparse.Namespace) -> int:
    from rag_eval import jobs
    from rag_eval.reports.console import print_gates, print_night

    cluster = _cluster(args)
    exp = _experiment(args)
    progress = _progress(args)
    with progress.running():
        places = jobs.NightFolders(root=args.root, accepted_root=args.accepted_dir, history=args.history)
        night = jobs.nightly(exp, places, gates=_gates(args), how=jobs.Execution(progress=progress, cluster=cluster),
                             other_experiment=args.other_experiment)  # fmt: skip
    if night.run.comparison is not None:
        print_gates(night.run.comparison.document)
    print_night(first=night.first, night=night.dir, accepted=night.accepted, history=args.history)
    return night.exit_code


def _cmd_load(args: argparse.Namespace) -> int:
    from rag_eval import jobs
    from rag_eval.experiment.load_table import LoadFlags
    from rag_eval.experiment.load_target import load_endpoint, load_settings
    from rag_eval.reports.console import describe_load, print_load

    exp = _experiment(args)
    endpoint = load_endpoint(exp.service, use_service=args.service, url=args.service_url,
                             configs_flag=args.configs is not None)  # fmt: skip
    flags = LoadFlags(
        concurrency=args.concurrency, duration=args.duration, max_searches=args.max_searches, rounds=args.rounds,
        warmup=args.warmup, configs=[c.strip() for c in args.configs.split(",")] if args.configs is not None else None,
    )  # fmt: skip
    settings = load_settings(exp, flags, endpoint)
    out = _out(args, folders.LOAD, exp.name)
    progress = _progress(args)
    progress.log(describe_load(exp, settings, out, endpoint=endpoint.endpoint if endpoint else None))
    with progress.running():
        result = jobs.load(exp, out, settings=settings, progress=progress, force_out=args.force_out, endpoint=endpoint)
    print_load(result.document, out)
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace) -> int:
    from rag_eval.jobs.inspect import inspect
    from rag_eval.reports.console import print_inspect

    print_inspect(inspect(args.uri, args.collection, load=args.load, rows=args.rows, token_env=args.token_env))
    return EXIT_OK


def _cmd_labels(args: argparse.Namespace) -> int:
    from rag_eval.jobs.labels import labels_command

    print(labels_command(args.labels_action, vars(args)))
    return EXIT_OK


# -- the parser --------------------------------------------------------------------------------

COMMAND_FUNCTIONS: dict[str, Command] = {
    "config": _cmd_config,
    "ingest": _cmd_ingest,
    "run": _cmd_run,
    "compare": _cmd_compare,
    "accept": _cmd_accept,
    "history": _cmd_history,
    "nightly": _cmd_nightly,
    "load": _cmd_load,
    "embed": _cmd_embed,
    "inspect": _cmd_inspect,
    "labels": _cmd_labels,
    "serve": serve_command,
}


def build_parser() -> argparse.ArgumentParser:
    """The ``rag-eval`` parser: a sub-command per job, its flags from :mod:`rag_eval.cli_flags`."""
    from rag_eval.cli_flags import CLUSTER_COMMANDS, COMMANDS, PATHS, cluster_flags, global_flags

    parser = argparse.ArgumentParser(
        prog="rag-eval",
        description="Replay labelled queries against Milvus through the RAG post-processing pipeline, "
        "measure, compare and gate configs.",
        epilog=f"{PATHS} Exit codes: 0 pass, 1 a fail gate fired, 2 bad usage or input, 3 infrastructure, 70 a bug.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    global_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text, add_flags in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=PATHS)
        global_flags(p)
        add_flags(p)
        if name in CLUSTER_COMMANDS:
            cluster_flags(p, replays=name != "compare")
        p.set_defaults(func=COMMAND_FUNCTIONS[name])
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rag-eval")
    except PackageNotFoundError:
        return "0+unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (see the module docstring)."""
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
    except KeyboardInterrupt as exc:
        print(f"rag-eval: {exc.advice if isinstance(exc, Interrupted) else 'interrupted'}", file=sys.stderr)
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
