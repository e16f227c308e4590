"""The flags of every ``rag-eval`` command: :data:`COMMANDS` names each command, its help line and what
adds its flags to its parser; :mod:`rag_eval.cli` builds the parser from it and maps each command to its
function. Flags only: nothing here reads a file or imports more than the default folders.

>>> [name for name, _, _ in COMMANDS]
['config', 'ingest', 'run', 'compare', 'accept', 'history', 'nightly', 'load', 'embed', 'inspect', 'labels', 'serve']
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rag_eval.rundir import folders

AddFlags = Callable[[argparse.ArgumentParser], None]


PATHS = (
    "Paths: every path in an experiment file ([dataset] path, properties, vectors_dir, cache_dir, a gates file, a "
    "Milvus Lite uri) is relative to that file; a path on the command line is relative to the working directory; "
    "what neither names is written under reports/ in the working directory."
)


def global_flags(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    """The flags every command takes, before the command (``top``: on the main parser) or after it: a
    command's own copy sets the value only when given (``SUPPRESS``), so it never undoes the main one's."""
    default = False if top else argparse.SUPPRESS
    p.add_argument("-q", "--quiet", action="store_true", default=default,
                   help="no progress bars (every command takes it, before or after the command)")  # fmt: skip


def cutoff_list(text: str) -> tuple[int, ...]:
    """``--cutoffs 5,10``: the cutoffs, as integers (argparse names the flag when one is not).

    >>> cutoff_list("10"), cutoff_list("5, 10")
    ((10,), (5, 10))
    """
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected cutoffs such as 10 or 5,10, got {text!r}") from None
    return values


def experiment_flags(p: argparse.ArgumentParser) -> None:
    """The experiment file and the flags that override its main settings."""
    p.add_argument(
        "experiment", nargs="?",
        help="experiment TOML file (optional with --dataset); its paths are relative to it",
    )  # fmt: skip
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


def gate_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gates", help="gates file, or a shipped one: default, nightly (default: the experiment's)")
    p.add_argument(
        "--intersection", action="store_true", help="pair runs over different data or queries on what they share"
    )
    other_experiment_flag(p)


def pairing(args: argparse.Namespace) -> dict[str, Any]:
    """The values of :func:`gate_flags` and ``--against`` a comparison is judged by (``jobs.Judging``'s)."""
    return {"against": args.against, "intersection": args.intersection, "other_experiment": args.other_experiment}


def other_experiment_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--other-experiment", action="store_true",
        help="pair with a run of another experiment (another name or production cap; refused without it)",
    )  # fmt: skip


def _accepted_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accepted-dir", default=str(folders.ACCEPTED), help="where accepted baselines are kept")


def _history_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", default=str(folders.HISTORY), help="the history file")


def config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a production .properties file, or a TOML file with a [rag] table")


def ingest_flags(p: argparse.ArgumentParser) -> None:
    experiment_flags(p)
    p.add_argument("--force", action="store_true", help="rebuild the collection even when its manifest matches")


def force_out_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force-out", action="store_true",
        help="write into --out even when it is a non-empty directory rag-eval did not write (refused otherwise)",
    )  # fmt: skip


def run_flags(p: argparse.ArgumentParser) -> None:
    experiment_flags(p)
    p.add_argument("--out", help=f"run directory (default: a new {folders.RUNS}/{folders.STAMPED_NAME})")
    force_out_flag(p)
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME=FILE[:MODE]",
        help="a config from a .properties file (repeatable; replaces the experiment's configs)",
    )
    p.add_argument("--baseline", help="name of the baseline config (default: the experiment's, else the first)")
    p.add_argument("--limit", type=int, help="replay only the first N queries (default: all)")
    p.add_argument("--traffic", metavar="LOG", help="a query log or trace export replayed too, without labels "
                   "(in place of the experiment's [traffic] path; its other keys kept)")  # fmt: skip
    p.add_argument("--cutoffs", type=cutoff_list, metavar="K[,K...]",
                   help="the cutoffs the console and the report lead with, measured too (default: the "
                        "experiment's [metrics] lead, else 5)")  # fmt: skip
    p.add_argument(
        "--latency",
        metavar="all|sample[:N]|off",
        help="which queries get their search timed, serially (default: the experiment's [timing], "
        "else a sample of 1,000 with seed 0; every query when there are fewer)",
    )
    gate_flags(p)
    p.add_argument("--against", help="compare with this earlier run directory instead of within the run")


def compare_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory (per_query.parquet, summary.json, manifest.json)")
    p.add_argument("--against", help="another run directory: every config against the same-named config there")
    gate_flags(p)
    p.add_argument("--out", help="where compare.json, junit.xml and summary.md go (default: RUN_DIR)")
    force_out_flag(p)


def accept_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory")
    _accepted_flag(p)
    p.add_argument(
        "--force", action="store_true",
        help="accept a run whose gates failed, or in place of another experiment's baseline (refused without it)",
    )  # fmt: skip


def history_flags(p: argparse.ArgumentParser) -> None:
    _history_flag(p)
    p.add_argument("--metric", action="append", help="a metric column (repeatable; default: a few key ones)")
    p.add_argument("--last", type=int, help="the last N rows of each config")
    p.add_argument("--config", dest="config_name", help="one config only")
    p.add_argument("--experiment", dest="experiment_name", help="one experiment only")


def nightly_flags(p: argparse.ArgumentParser) -> None:
    experiment_flags(p)
    p.add_argument("--gates", help="gates file or shipped name (default: the experiment's, else default)")
    p.add_argument(
        "--root", default=str(folders.NIGHTS),
        help="nights go to ROOT/<experiment>/<UTC date>/, the latest named in ROOT/<experiment>/LATEST",
    )  # fmt: skip
    _accepted_flag(p)
    other_experiment_flag(p)
    _history_flag(p)


def load_flags(p: argparse.ArgumentParser) -> None:
    experiment_flags(p)
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
    p.add_argument(
        "--service", action="store_true",
        help="measure the experiment's [service] endpoint (url: MCP over streamable HTTP, or http) end to end "
        "instead of the configs' own lookups; a stdio [service] is refused",
    )  # fmt: skip
    p.add_argument("--service-url", metavar="URL",
                   help="measure this MCP endpoint (streamable HTTP, e.g. http://127.0.0.1:8000/mcp) end to end, "
                   "as --service does")  # fmt: skip
    p.add_argument("--limit", type=int, help="replay only the first N queries (default: all)")
    p.add_argument(
        "--out",
        help="where load.json goes: a finished run directory (its report then shows the curve and its gates can "
        f"hold it) or a new directory (default: a new {folders.LOAD}/{folders.STAMPED_NAME})",
    )
    force_out_flag(p)


def embed_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="BEIR data set directory; vectors go to DATASET/vectors/")
    p.add_argument("--chunker", help="chunker spec (default: the project default)")
    p.add_argument("--split", help="qrels split (default test)")
    p.add_argument("--model", help="sentence-transformers model (default all-MiniLM-L6-v2)")
    p.add_argument("--cache-dir", default="reports/cache/embeddings", help="embedding cache directory")


def inspect_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("uri", help="a Milvus Lite file or http(s)://host:port (a server or cluster)")
    p.add_argument("--collection", help="the collection to describe (without it: the collections there)")
    p.add_argument("--rows", type=int, default=3, help="sample rows to show (default 3, at most 50)")
    p.add_argument(
        "--load", action="store_true",
        help="load a server's collection that is not loaded, to show rows (loading changes no data)",
    )  # fmt: skip
    p.add_argument("--token-env", default="RAG_EVAL_MILVUS_TOKEN", help="environment variable holding the token")


def labels_flags(p: argparse.ArgumentParser) -> None:
    """``labels next RUN_DIR --out FILE [--count N]`` (the query log queries to label next) and ``labels import
    MARKED --dataset DIR [--split NAME]`` (a marked labelling file into a data set's labels)."""
    actions = p.add_subparsers(dest="labels_action", metavar="ACTION", required=True)
    what = "write the labelling file of a run's query log queries the configs disagree on most"
    picked = actions.add_parser("next", help=what, description=what, epilog=PATHS)
    global_flags(picked)
    picked.add_argument("run_dir", metavar="RUN_DIR", help="a run directory of an experiment with [traffic]")
    picked.add_argument("--out", required=True, help="the labelling file to write (JSON lines; never overwritten)")
    picked.add_argument("--count", type=int, default=50, help="queries to pick (default 50)")
    picked.add_argument("--force", action="store_true", help="overwrite an existing labelling file (marks are lost)")
    what = "add the fully marked queries of a labelling file to a data set: queries, span qrels, document qrels"
    imported = actions.add_parser("import", help=what, description=what, epilog=PATHS)
    global_flags(imported)
    imported.add_argument("marked", metavar="MARKED", help="a labelling file whose chunks a person graded (0, 1 or 2)")
    imported.add_argument("--dataset", required=True, help="the BEIR data set directory the labels are added to")
    imported.add_argument("--split", default="test", help="the qrels split the labels are added to (default test)")


def serve_flags(p: argparse.ArgumentParser) -> None:
    """``serve [FILE]``: a serve TOML file (docs/serve.md) and the flags that override it."""
    p.add_argument("file", nargs="?", help="serve TOML file ([serve], [milvus], [embedder]); flags override it")
    p.add_argument("--properties", help="the pipeline's .properties file (every rag.* key)")
    p.add_argument("--milvus-uri", help="a Milvus Lite file or http(s)://host:port")
    p.add_argument("--collection", help="the collection to search")
    p.add_argument("--field", action="append", help="KEY=FIELD of a collection built elsewhere (id, vector, text, ...)")
    for key in ("provider", "model", "base-url", "callable"):
        p.add_argument(f"--embedder-{key}", help=f"the query embedder's {key} (as [embedder] {key.replace('-', '_')})")
    p.add_argument("--transport", choices=("stdio", "http"), help="stdio (default) or streamable HTTP")
    p.add_argument("--host", help="HTTP: the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP: the port (default 8765)")
    p.add_argument("--concurrency", type=int, help="lookups at a time, 1 to 256 (default 8)")
    p.add_argument("--request-timeout", type=float, help="seconds a lookup may take (default 30)")
    p.add_argument("--log-queries", action="store_true", help="log each query (queries are not logged otherwise)")
    p.add_argument("--trace-file", help="write the spans as OTLP JSON lines to this file")


COMMANDS: tuple[tuple[str, str, AddFlags], ...] = (
    ("config", "validate a RagConfig (.properties or .toml) and print the effective settings", config_flags),
    ("ingest", "chunk, embed and write a data set into Milvus (reused when unchanged)", ingest_flags),
    ("run", "replay the labelled queries under every config and write the run directory", run_flags),
    ("compare", "compare run directories and apply the gates (reads run directories only)", compare_flags),
    ("accept", "make a run the accepted baseline of its experiment (later nights pair with it)", accept_flags),
    ("history", "print the trend of the nightly history", history_flags),
    ("nightly", "run, compare with the accepted baseline, gate, and append to the history", nightly_flags),
    (
        "load",
        "latency under concurrent load on a Milvus server, or of a served endpoint: QPS and p50/p95/p99 per client "
        "count and config",
        load_flags,
    ),
    ("embed", "write a data set's precomputed vectors (needs the embed extra)", embed_flags),
    (
        "inspect",
        "describe a collection built elsewhere (schema, index, rows, load state) and suggest its [collection] table",
        inspect_flags,
    ),
    ("labels", "turn a marked labelling file of traffic queries into a data set's labels: labels import", labels_flags),
    ("serve", "serve lookup_knowledge as an MCP tool (stdio or streamable HTTP) on a Milvus collection", serve_flags),
)
CLUSTER_COMMANDS = ("run", "nightly", "compare")  # their comparisons (and query batches) can run on Dask workers


def cluster_flags(p: argparse.ArgumentParser, *, replays: bool) -> None:
    """``--workers``, ``--scheduler`` and, where a command replays, ``--parts``: where it runs on Dask."""
    what = "replay the query batches and compare the configs" if replays else "compare the configs"
    p.add_argument(
        "--workers", metavar="N",
        help=f"{what} in N local worker processes (Dask); the results are those of one process",
    )  # fmt: skip
    p.add_argument(
        "--scheduler", metavar="ADDRESS", help=f"{what} on the workers of this Dask scheduler (tcp://host:8786)"
    )
    if replays:
        p.add_argument(
            "--parts", metavar="URL",
            help="where the workers write finished batches: a directory or fsspec URL they reach (default: the "
            "run directory's .parts)",
        )  # fmt: skip
