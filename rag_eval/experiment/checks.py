"""The checks of an experiment's values, written once for every way an experiment is made.

A file (:mod:`~rag_eval.experiment.reader`) and the command line
(:mod:`~rag_eval.experiment.overrides`) both build an :class:`Experiment` and then call
:func:`check_experiment` on it; only the key that names a problem differs (``milvus.uri`` in a
file, ``--milvus-uri`` when the flag set it), and :class:`Keys` says which. The readers check what
only they can see (types, unknown keys, names of kinds); everything that is a property of the
values is here.

>>> from pathlib import Path
>>> exp = Experiment(name="a b", source=None, dataset_path=Path("kb"), split="test", query_limit=0)
>>> [str(p) for p in check_experiment(exp, Keys(flags={"query_limit": "--limit"}))]  # doctest: +NORMALIZE_WHITESPACE
["'a b': up to 100 letters, digits, '.', '_', '-', starting with a letter or digit @ experiment.name",
 'must be >= 1, got 0 @ --limit']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem, as_written, quoted
from rag_eval.datasets.beir import split_name_problem
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.embed.providers import settings_problems
from rag_eval.experiment.model import MAX_NAME, ConfigSpec, Experiment
from rag_eval.files import name_length_problem as file_name_problem
from rag_eval.search.milvus.lite import lite_path, lite_path_problem
from rag_eval.search.milvus.schema import INDEX_TYPES, MAX_TOPK, METRICS, ModeSupport, is_server_uri, uri_problem
from rag_eval.traffic.logs import spec_problems

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # config names become file names under runs/
MAX_CUTOFFS = 20  # each cutoff is 8 more measure columns (P, R, nDCG, Success at k; chunk and document)
CUTOFF_RULE = (
    f"cutoffs are 1 to {MAX_CUTOFFS} distinct integers from 1 to {MAX_TOPK:,} "
    f"(a rank past Milvus's {MAX_TOPK:,} hits per search is never reached)"
)
# The longest file name each kind of name becomes ({} the name), and where it is made:
# - a config's TREC runs, runs/<config>.trec and runs/<config>.docs.trec, are written through a
#   temporary beside them (RunStore.write_trec_runs: tempfile.mkstemp adds 8 random characters);
# - a split's qrels in the run, qrels/<split>.chunks.trec and qrels/<split>.docs.trec, through a temporary
#   beside them too (RunStore.write_trec_qrels, rag_eval.files.replaced);
# - an experiment's run directory is reports/runs/<experiment>-<UTC time> (reports/load/... for a load
#   measurement; rag_eval.rundir.folders), its accepted baseline reports/accepted/<experiment>, staged as
#   .<experiment>.XXXXXXXX and moved aside as .<experiment>.old (rag_eval.compare.history.accept).
LONGEST_FILE_NAME: Mapping[str, tuple[str, str]] = {
    "config": (".{}.docs.trec.XXXXXXXX.tmp", "runs/<name>.docs.trec (written as .<name>.docs.trec.XXXXXXXX.tmp)"),
    "experiment": ("{}-YYYYMMDDTHHMMSSZ", "reports/runs/<name>-<UTC time>"),
    "split": (
        ".{}.chunks.trec.XXXXXXXX.tmp",
        "qrels/<split>.chunks.trec of the run (written as .<split>.chunks.trec.XXXXXXXX.tmp)",
    ),
}

# The key of each checked field in an experiment file; a flag that set a field names it instead.
FILE_KEYS: Mapping[str, str] = {
    "name": "experiment.name",
    "production_cap": "experiment.production_cap",
    "baseline": "experiment.baseline",
    "dataset_path": "dataset.path",
    "split": "dataset.split",
    "min_overlap_chars": "dataset.min_overlap_chars",
    "chunker_spec": "chunker.spec",
    "cutoffs": "metrics.cutoffs",
    "lead_cutoffs": "metrics.lead",
    "cache_dir": "embedder.cache_dir",
    "embedder": "embedder",
    "vectors_dir": "embedder.vectors_dir",
    "milvus_uri": "milvus.uri",
    "timeout": "milvus.timeout",
    "index": "milvus.index",
    "profile": "ingest",
    "configs": "configs",
    "warmup": "timing.warmup",
    "batch_size": "timing.batch_size",
    "query_limit": "timing.query_limit",
    "timing": "timing",
    "drilldown_queries": "report.drilldown_queries",
    "load": "load",
    "existing": "collection",
}


@dataclass(frozen=True, slots=True)
class Keys:
    """Which key names a problem with a field: the file's, unless a flag set the field.

    >>> Keys().of("index", "type"), Keys(flags={"milvus_uri": "--milvus-uri"}).of("milvus_uri")
    ('milvus.index.type', '--milvus-uri')
    """

    flags: Mapping[str, str] = field(default_factory=dict)  # Experiment field -> the flag that set it

    def of(self, name: str, sub: str = "") -> str:
        if name in self.flags:
            return self.flags[name]
        key = FILE_KEYS[name]
        return f"{key}.{sub}" if sub else key


ExperimentCheck = Callable[[Experiment, Keys], Iterable[ConfigProblem]]


def check_experiment(exp: Experiment, keys: Keys | None = None) -> list[ConfigProblem]:
    """Every problem with the values of ``exp`` (an empty list: it can run), each named by its key."""
    named = keys if keys is not None else Keys()
    return [problem for check in _CHECKS for problem in check(exp, named)]


def raise_problems(problems: Sequence[ConfigProblem], source: str | None) -> None:
    """All the problems at once, as one :class:`ConfigError` (nothing when there are none)."""
    if problems:
        raise ConfigError(problems, path=source)


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot name a file, or None. Checked before a path is resolved or opened (both
    raise ValueError on a NUL byte).

    >>> path_problem("kb\\x00/corpus.jsonl")
    "'kb\\\\x00/corpus.jsonl' holds a NUL byte, which no path can"
    """
    if "\0" in text:
        return f"{quoted(text)} holds a NUL byte, which no path can"
    return None


def name_length_problem(kind: str, name: str) -> str | None:
    """Why ``name`` (a ``config``, ``experiment`` or ``split`` name) is too long for the file names made of
    it, or None: the longest must fit in :data:`~rag_eval.files.NAME_MAX` bytes, so that a run cannot fail at its end.

    >>> name_length_problem("config", "e" * 231) is None
    True
    >>> str(name_length_problem("config", "e" * 232)).split(":")[0]
    '232 bytes is too long for a config name'
    """
    template, shown = LONGEST_FILE_NAME[kind]
    return file_name_problem(kind, name, template, shown)


def name_problems(key: str, name: str) -> list[ConfigProblem]:
    """Experiment names become file and directory names: nothing that can leave ``reports/runs/``, and
    nothing too long for the file names made of it."""
    if not SAFE_NAME.fullmatch(name) or len(name) > MAX_NAME or name in {".", ".."}:
        return [
            ConfigProblem(
                key, f"{quoted(name)}: up to {MAX_NAME} letters, digits, '.', '_', '-', starting with a letter or digit"
            )
        ]
    too_long = name_length_problem("experiment", name)  # within MAX_NAME today: the rule if that is raised
    return [ConfigProblem(key, too_long)] if too_long else []


def _number(value: float) -> int | float:
    """A float read from an integer as the integer it was written as (3601.0 is shown as 3601)."""
    return int(value) if value.is_integer() else value


def _experiment(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    yield from name_problems(keys.of("name"), exp.name)
    if exp.production_cap is not None and exp.production_cap < 1:
        yield ConfigProblem(keys.of("production_cap"), f"must be >= 1, got {exp.production_cap}")


def _paths(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    for name in ("dataset_path", "vectors_dir", "cache_dir"):
        value = getattr(exp, name)
        if value is not None and (why := path_problem(str(value))):
            yield ConfigProblem(keys.of(name), why)


def _dataset(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    # the split names files in the data set (qrels/<split>.tsv) and in the run (qrels/<split>.chunks.trec)
    if why := split_name_problem(exp.split) or name_length_problem("split", exp.split):
        yield ConfigProblem(keys.of("split"), why)
    if exp.min_overlap_chars < 1:  # a chunk sharing no character with a span would be relevant
        yield ConfigProblem(
            keys.of("min_overlap_chars"),
            f"must be >= 1 (the characters a chunk shares with an evidence span to be relevant), "
            f"got {exp.min_overlap_chars}",
        )


def _chunker(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    try:
        parse_chunker(exp.chunker_spec)
    except ConfigError as err:
        yield from (ConfigProblem(f"{keys.of('chunker_spec')} ({p.key})", p.message) for p in err.problems)


def _milvus(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    if exp.milvus_uri is not None and (why := uri_problem(exp.milvus_uri)):
        yield ConfigProblem(keys.of("milvus_uri"), why)
    elif not is_server_uri(uri := exp.resolved_uri) and (why := lite_path_problem(uri)):
        yield ConfigProblem(keys.of("milvus_uri"), f"{lite_path(uri)}: {why}")  # read again when it is opened
    if not 0 < exp.timeout <= 3600:
        yield ConfigProblem(keys.of("timeout"), f"must be > 0 and <= 3600 seconds, got {_number(exp.timeout)}")
    if exp.index.index_type not in INDEX_TYPES:
        yield ConfigProblem(
            keys.of("index", "type"), f"{quoted(exp.index.index_type)} is not one of {', '.join(INDEX_TYPES)}"
        )
    if exp.index.metric not in METRICS:
        yield ConfigProblem(
            keys.of("index", "metric"), f"{quoted(exp.index.metric)} is not one of {', '.join(METRICS)}"
        )


def _ingest(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    profile = exp.profile
    for share, value in (
        ("legacy_share", profile.legacy_share),
        ("missing_doc_share", profile.missing_doc_share),
        ("duplicate_share", profile.duplicate_share),
    ):
        if not 0.0 <= value <= 1.0:
            yield ConfigProblem(keys.of("profile", share), f"must be within [0, 1], got {_number(value)}")
    if profile.legacy_share + profile.missing_doc_share > 1.0:
        yield ConfigProblem(keys.of("profile"), "legacy_share + missing_doc_share must not exceed 1")


def _configs(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    names = [c.name for c in exp.configs]
    for name in names:
        if not SAFE_NAME.fullmatch(name):
            yield ConfigProblem(keys.of("configs"), f"config name {quoted(name)}: letters, digits, '.', '_', '-' only")
        elif too_long := name_length_problem("config", name):
            yield ConfigProblem(keys.of("configs"), too_long)
    for dup in sorted({n for n in names if names.count(n) > 1}):
        yield ConfigProblem(keys.of("configs"), f"config name {quoted(dup)} is given more than once")
    folded: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):  # a config's files are named after it: one file on a case-blind disk
        folded.setdefault(name.casefold(), []).append(name)
    for same in (group for group in folded.values() if len(group) > 1):
        shown = " and ".join(quoted(n) for n in same)
        yield ConfigProblem(
            keys.of("configs"), f"config names {shown} differ only by case: their files would collide on a "
            "case-insensitive file system; rename one",
        )  # fmt: skip
    if exp.configs and exp.baseline not in names:
        yield ConfigProblem(keys.of("baseline"), f"{quoted(exp.baseline)} is not a config name ({', '.join(names)})")
    yield from _cap_problems(exp.configs, exp.production_cap)
    yield from _width_problems(exp.configs)


def retrieve_k_problem(config: RagConfig) -> str | None:
    """Why Milvus cannot be asked for ``config``'s retrieve-k hits in one search, or None.

    >>> retrieve_k_problem(RagConfig.from_mapping({"rag.retrieve-k": 20_000, "rag.return-n": 5}))
    "retrieve-k 20,000 is over Milvus's limit of 16,384 hits"
    """
    if config.retrieve_k > MAX_TOPK:
        return f"retrieve-k {config.retrieve_k:,} is over Milvus's limit of {MAX_TOPK:,} hits"
    return None


def _width_problems(configs: Sequence[ConfigSpec]) -> list[ConfigProblem]:
    return [ConfigProblem(f"configs.{c.name}", why) for c in configs if (why := retrieve_k_problem(c.config))]


def _cap_problems(configs: Sequence[ConfigSpec], production_cap: int | None) -> list[ConfigProblem]:
    """A legacy config must have a production cap to be checked against, never an implicit default."""
    if production_cap is not None or not any(c.config.pipeline.is_legacy for c in configs):
        return []
    caps = sorted({c.config.max_chunks_per_document for c in configs if not c.config.pipeline.is_legacy})
    if len(caps) > 1:
        return [
            ConfigProblem(
                "experiment.production_cap",
                f"legacy configs are checked against the production per-document cap, and the evidence configs "
                f"use {caps}: set the one production runs",
            )
        ]
    return []


def _metrics(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    cutoffs = exp.cutoffs
    outside = sorted({k for k in cutoffs if not 1 <= k <= MAX_TOPK})
    twice = sorted({k for k in cutoffs if cutoffs.count(k) > 1})
    if not cutoffs:
        reason = "empty"
    elif outside:
        reason = f"{outside} out of range"
    elif twice:
        reason = f"{twice} given more than once"
    elif len(cutoffs) > MAX_CUTOFFS:
        reason = f"{len(cutoffs)} cutoffs"
    else:
        unmeasured = [k for k in exp.lead_cutoffs if k not in cutoffs]
        if unmeasured:
            yield ConfigProblem(keys.of("lead_cutoffs"), f"{unmeasured} not among the cutoffs measured {list(cutoffs)}")
        return
    yield ConfigProblem(keys.of("cutoffs"), f"{reason}: {CUTOFF_RULE}")


def _timing(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    if exp.warmup < 0:
        yield ConfigProblem(keys.of("warmup"), "must be >= 0")
    if exp.batch_size < 1:
        yield ConfigProblem(keys.of("batch_size"), "must be >= 1")
    if exp.query_limit is not None and exp.query_limit < 1:
        yield ConfigProblem(keys.of("query_limit"), f"must be >= 1, got {exp.query_limit}")
    if exp.timing.sample_size < 1:
        yield ConfigProblem(keys.of("timing", "latency_sample"), f"must be >= 1, got {exp.timing.sample_size}")


def _report(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    if exp.drilldown_queries is not None and exp.drilldown_queries < 1:
        yield ConfigProblem(keys.of("drilldown_queries"), "must be >= 1")


def _load(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    names = [c.name for c in exp.configs]
    if exp.load is not None and names:
        for name in exp.load.configs:
            if name not in names:
                yield ConfigProblem(
                    keys.of("load", "configs"), f"{quoted(name)} is not a config name ({', '.join(names)})"
                )


FIELD_KEYS = ("id", "vector", "text", "doc_id", "chunk_index", "title", "source", "category", "start", "end")


def _existing(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    """A ``[collection]``: its field keys are the port's (the fields themselves are read against the
    collection's schema before any query), the shares and thresholds in range; its configs search densely
    or grouped (the collection has no BM25 field of ours)."""
    spec = exp.existing
    if spec is None:
        return
    for key in sorted(set(spec.fields) - set(FIELD_KEYS)):
        yield ConfigProblem(
            keys.of("existing", f"fields.{as_written(key)}"), f"unknown key (known: {', '.join(FIELD_KEYS)})"
        )
    for key in ("id", "vector", "text"):
        if not spec.fields.get(key, "").strip():
            yield ConfigProblem(keys.of("existing", f"fields.{key}"), "required: the collection's field for it")
    if not 0.0 <= spec.max_unresolved <= 1.0:
        yield ConfigProblem(keys.of("existing", "max_unresolved"),
                            f"a share from 0 to 1 of the rows read, got {_number(spec.max_unresolved)}")  # fmt: skip
    if not 0.0 < spec.fuzzy_threshold <= 100.0:
        yield ConfigProblem(keys.of("existing", "fuzzy_threshold"),
                            f"a score above 0 and at most 100, got {_number(spec.fuzzy_threshold)}")  # fmt: skip
    support = ModeSupport(uri=exp.target.redacted_uri, collection=spec.name, built_elsewhere=True)
    for n, c in enumerate(exp.configs):
        refusal = support.refusal(c.mode)  # what the search would refuse, known before anything runs
        if refusal is not None:
            yield ConfigProblem(keys.flags.get("configs", f"configs[{n}].mode"), refusal)


def _embedder(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    """The ``[embedder]`` provider's values (:func:`rag_eval.embed.providers.settings_problems`)."""
    for key, message in settings_problems(exp.embedder, existing=exp.existing is not None):
        yield ConfigProblem(keys.of("embedder", key), message)


def _traffic(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    """The ``[traffic]`` table's values (:func:`rag_eval.traffic.logs.spec_problems`); its file is read with
    the data set, before anything is built."""
    if exp.traffic is not None:
        yield from spec_problems(exp.traffic)


def _service(exp: Experiment, keys: Keys) -> Iterator[ConfigProblem]:
    """The ``[service]`` names a config of the experiment (its conformance is diffed against it)."""
    names = [c.name for c in exp.configs]
    if exp.service is not None and names and (exp.service.config or exp.baseline) not in names:
        yield ConfigProblem("service.config", f"{quoted(exp.service.config)} is not a config name ({', '.join(names)})")


_CHECKS: tuple[ExperimentCheck, ...] = (
    _experiment,
    _paths,
    _dataset,
    _chunker,
    _embedder,
    _milvus,
    _ingest,
    _configs,
    _metrics,
    _timing,
    _report,
    _load,
    _existing,
    _traffic,
    _service,
)
