"""Experiments: which data set, chunker, embedder, Milvus, ingest profile and configs.

An experiment is a TOML file; the main settings have CLI flags too (``rag-eval run --help``).
Input paths in the file (data set, .properties, vectors) are relative to the file; output
paths (the Milvus Lite file, the embedding cache) are relative to the working directory,
so every experiment writes under the project's ``reports/``. Example::

    [experiment]
    name = "legacy-vs-evidence"

    [dataset]
    path = "../incident-kb"
    split = "test"

    [chunker]
    spec = "sentences:size=3,overlap=0"

    [milvus]
    uri = "reports/milvus/incident-kb.db"      # a path: embedded Milvus Lite; http(s)://: a server

    [ingest]
    profile = "production"                      # or "clean", or explicit shares below

    [[configs]]
    name = "legacy"
    properties = "configs/legacy.properties"    # a production .properties file

    [[configs]]
    name = "evidence"
    baseline = true
    rag = { retrieve-k = 20, return-n = 5, max-chunks-per-document = 2 }

    [gates]                                     # optional: the shipped default gates otherwise
    file = "nightly"                            # a gates file (relative to this file) or a shipped name,
                                                # or inline: checks = ["fail cap_compliance == 1", ...]

    [load]                                      # optional: latency under concurrent load (a server only;
    concurrency = [1, 2, 4, 8]                  # see rag_eval.harness.load_settings)
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem
from rag_eval.core.lookup import PostProcessor
from rag_eval.core.types import SearchMode
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, parse_chunker
from rag_eval.embed.embedders import DEFAULT_MODEL
from rag_eval.harness.load_settings import LoadSettings, settings_from_table
from rag_eval.harness.timing import LatencyMode, TimingPlan
from rag_eval.harness.whatif import WHAT_IFS
from rag_eval.search.milvus.schema import (
    INDEX_TYPES,
    MAX_TOPK,
    METRICS,
    IndexSpec,
    SearchTarget,
    redact_uri,
    uri_problem,
)

DEFAULT_LITE_DIR = Path("reports/milvus")
DEFAULT_CACHE_DIR = Path("reports/cache/embeddings")
DEFAULT_CUTOFFS = (1, 3, 5, 10)


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestProfile:
    """How rows are written, to reproduce production data: shares of legacy rows (no
    chunk_index), rows without doc_id, and re-ingested duplicates (same content, new
    vector id). Selection is a deterministic hash of (seed, chunk key)."""

    name: str = "clean"
    legacy_share: float = 0.0
    missing_doc_share: float = 0.0
    duplicate_share: float = 0.0
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "legacy_share": self.legacy_share,
            "missing_doc_share": self.missing_doc_share,
            "duplicate_share": self.duplicate_share,
            "seed": self.seed,
        }


DEFAULT_PROFILE = "production"  # rows as production has them, whether a run comes from a file or from flags
PROFILES: Mapping[str, IngestProfile] = {
    "clean": IngestProfile(),
    "production": IngestProfile(
        name="production", legacy_share=0.10, missing_doc_share=0.05, duplicate_share=0.10, seed=7
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSpec:
    """One named pipeline config of an experiment and how it searches.

    ``what_if`` names an evaluation-only post-processor (:data:`WHAT_IFS`) that replaces
    the one the config would choose; production configs leave it unset.
    """

    name: str
    config: RagConfig
    mode: SearchMode = SearchMode.DENSE
    origin: str = "inline"  # the .properties path, or "inline"
    what_if: str | None = None

    def config_hash(self) -> str:
        body: dict[str, Any] = {"rag": self.config.as_properties(), "mode": self.mode.value}
        if self.what_if is not None:
            body["what_if"] = self.what_if
        payload = json.dumps(body, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def postprocessor(self) -> PostProcessor | None:
        """The what-if post-processor, or None for the config's own pipeline."""
        return None if self.what_if is None else WHAT_IFS[self.what_if](self.config)


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    name: str
    source: str | None  # the TOML file, None when built from flags only
    dataset_path: Path
    split: str
    chunker_spec: str = DEFAULT_CHUNKER_SPEC
    min_overlap_chars: int = 1
    embedder_model: str = DEFAULT_MODEL
    embedder_normalize: bool = True
    cache_dir: Path = DEFAULT_CACHE_DIR
    vectors_dir: Path | None = None  # precomputed vectors; default <dataset>/vectors
    milvus_uri: str | None = None  # None: Lite file under reports/milvus/
    collection: str | None = None  # None: derived from the data set and the manifest
    token_env: str = "RAG_EVAL_MILVUS_TOKEN"
    timeout: float = 10.0
    index: IndexSpec = field(default_factory=IndexSpec)
    profile: IngestProfile = field(default_factory=lambda: PROFILES[DEFAULT_PROFILE])
    configs: tuple[ConfigSpec, ...] = ()
    baseline: str = ""
    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS
    warmup: int = 5
    timing: TimingPlan = field(default_factory=TimingPlan)  # which queries get their search timed
    batch_size: int = 64
    query_limit: int | None = None
    production_cap: int | None = None  # the cap legacy configs are checked against; None: the evidence configs'
    drilldown_queries: int | None = None  # queries in the HTML report's drill-down (None: its default)
    gates: Mapping[str, Any] | None = None  # the [gates] table as written; rag_eval.compare reads it
    load: LoadSettings | None = None  # the [load] table: `rag-eval run` then measures latency under load too

    @property
    def baseline_spec(self) -> ConfigSpec:
        return next(c for c in self.configs if c.name == self.baseline)

    def checked_cap(self, spec: ConfigSpec) -> tuple[int | None, str]:
        """The per-document cap ``spec``'s delivery is checked against, and where it comes from.

        An evidence config is checked against its own cap. A legacy pipeline has none, so it is
        checked against the production cap: ``experiment.production_cap`` when set, else the
        one cap the experiment's evidence configs share; (None, why) when there is none to use.
        """
        if not spec.config.pipeline.is_legacy:
            return spec.config.max_chunks_per_document, "config"
        if self.production_cap is not None:
            return self.production_cap, "experiment.production_cap"
        caps = sorted({c.config.max_chunks_per_document for c in self.configs if not c.config.pipeline.is_legacy})
        if len(caps) == 1:
            return caps[0], "the evidence configs' cap"
        if not caps:
            return None, "no cap to check against (no evidence config, no experiment.production_cap)"
        return None, f"the evidence configs use caps {caps}: set experiment.production_cap"

    @property
    def resolved_uri(self) -> str:
        if self.milvus_uri:
            return self.milvus_uri
        return str(DEFAULT_LITE_DIR / f"{_slug_name(self.dataset_path.name)}.db")

    @property
    def target(self) -> SearchTarget:
        """Where this experiment searches (the collection is None until the ingest names it)."""
        return SearchTarget(
            uri=self.resolved_uri, collection=self.collection, index=self.index, token_env=self.token_env,
            timeout=self.timeout,
        )  # fmt: skip

    @property
    def resolved_vectors_dir(self) -> Path:
        return self.vectors_dir if self.vectors_dir is not None else self.dataset_path / "vectors"

    def fingerprint(self) -> str:
        """What must not change for a run directory to be resumed."""
        payload = {
            "dataset": str(self.dataset_path.resolve()),
            "split": self.split,
            "chunker": self.chunker_spec,
            "min_overlap_chars": self.min_overlap_chars,
            "embedder": [self.embedder_model, self.embedder_normalize],
            "uri": self.resolved_uri,
            "collection": self.collection,
            "index": self.index.to_json(),
            "profile": self.profile.as_dict(),
            "configs": [(c.name, c.config_hash()) for c in self.configs],
            "baseline": self.baseline,
            "batch_size": self.batch_size,
            "query_limit": self.query_limit,
            "production_cap": self.production_cap,
            "timing": self.timing.as_dict(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "dataset": str(self.dataset_path),
            "split": self.split,
            "chunker": self.chunker_spec,
            "min_overlap_chars": self.min_overlap_chars,
            "embedder": {"model": self.embedder_model, "normalize": self.embedder_normalize},
            "milvus": {
                "uri": redact_uri(self.resolved_uri),
                "collection": self.collection,
                "index": self.index.to_json(),
            },
            "ingest_profile": self.profile.as_dict(),
            "configs": [
                {
                    "name": c.name,
                    "mode": c.mode.value,
                    "origin": c.origin,
                    "hash": c.config_hash(),
                    "rag": c.config.as_properties(),
                    "what_if": c.what_if,
                }
                for c in self.configs
            ],
            "production_cap": self.production_cap,
            "baseline": self.baseline,
            "cutoffs": list(self.cutoffs),
            "warmup": self.warmup,
            "timing": self.timing.as_dict(),
            "batch_size": self.batch_size,
            "query_limit": self.query_limit,
            "report": {"drilldown_queries": self.drilldown_queries},
            "gates": dict(self.gates) if self.gates is not None else None,
            "load": self.load.as_dict() if self.load is not None else None,
        }


# -- parsing ----------------------------------------------------------------------------------

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # config names become file names under runs/
_TOP_KEYS = {
    "experiment", "dataset", "chunker", "embedder", "milvus", "ingest", "configs", "metrics", "timing", "report",
    "gates", "load",
}  # fmt: skip


class _Reader:
    """Typed access to a TOML table that records problems instead of raising at once."""

    def __init__(self, table: Mapping[str, Any], prefix: str, problems: list[ConfigProblem]) -> None:
        self.table = table
        self.prefix = prefix
        self.problems = problems
        self.used: set[str] = set()

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.table:
            return default
        value = self.table[key]
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            self.problems.append(ConfigProblem(f"{self.prefix}.{key}", f"expected a number, got {value!r}"))
            return default
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            self.problems.append(ConfigProblem(f"{self.prefix}.{key}", f"expected {names}, got {value!r}"))
            return default
        return value

    def finish(self) -> None:
        for key in self.table:
            if key not in self.used:
                self.problems.append(ConfigProblem(f"{self.prefix}.{key}", "unknown key"))


def load_experiment(path: str | Path) -> Experiment:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([ConfigProblem("(file)", f"cannot read: {exc.strerror}")], path=str(p)) from exc
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([ConfigProblem("(file)", f"not valid TOML: {exc}")], path=str(p)) from exc
    return experiment_from_table(table, base=p.parent, source=str(p))


def experiment_from_table(table: Mapping[str, Any], *, base: Path, source: str | None) -> Experiment:
    problems: list[ConfigProblem] = []
    for key in table:
        if key not in _TOP_KEYS:
            problems.append(ConfigProblem(key, f"unknown table (known: {', '.join(sorted(_TOP_KEYS))})"))

    def sub(name: str) -> _Reader:
        value = table.get(name, {})
        if not isinstance(value, Mapping):
            problems.append(ConfigProblem(name, "expected a table"))
            value = {}
        return _Reader(value, name, problems)

    exp = sub("experiment")
    name = exp.get("name", str, "experiment")
    baseline = exp.get("baseline", str, "")
    production_cap = exp.get("production_cap", int)
    exp.finish()
    if production_cap is not None and production_cap < 1:
        problems.append(ConfigProblem("experiment.production_cap", f"must be >= 1, got {production_cap}"))

    ds = sub("dataset")
    ds_path_raw = ds.get("path", str)
    if ds_path_raw is None:
        problems.append(ConfigProblem("dataset.path", "required"))
    split = ds.get("split", str, "test")
    min_overlap = ds.get("min_overlap_chars", int, 1)
    ds.finish()

    ch = sub("chunker")
    chunker_spec = ch.get("spec", str, DEFAULT_CHUNKER_SPEC)
    ch.finish()
    try:
        parse_chunker(chunker_spec)
    except ConfigError as err:
        problems.extend(ConfigProblem(f"chunker.spec ({p.key})", p.message) for p in err.problems)

    em = sub("embedder")
    model = em.get("model", str, DEFAULT_MODEL)
    normalize = em.get("normalize", bool, True)
    cache_dir = em.get("cache_dir", str)
    vectors_dir = em.get("vectors_dir", str)
    em.finish()

    mv = sub("milvus")
    uri = mv.get("uri", str)
    collection = mv.get("collection", str)
    token_env = mv.get("token_env", str, "RAG_EVAL_MILVUS_TOKEN")
    timeout = mv.get("timeout", (int, float), 10.0)
    idx = mv.get("index", Mapping, {})
    mv.finish()
    index = _index(idx, problems)

    ing = sub("ingest")
    profile = _profile(ing, problems)
    ing.finish()

    mt = sub("metrics")
    cutoffs = mt.get("cutoffs", list, list(DEFAULT_CUTOFFS))
    mt.finish()
    if not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in cutoffs):
        problems.append(ConfigProblem("metrics.cutoffs", f"expected positive integers, got {cutoffs!r}"))
        cutoffs = list(DEFAULT_CUTOFFS)

    tm = sub("timing")
    warmup = tm.get("warmup", int, 5)
    batch_size = tm.get("batch_size", int, 64)
    query_limit = tm.get("query_limit", int)
    timing = _timing_plan(tm, problems)
    tm.finish()

    rp = sub("report")
    drilldown_queries = rp.get("drilldown_queries", int)
    rp.finish()
    if drilldown_queries is not None and drilldown_queries < 1:
        problems.append(ConfigProblem("report.drilldown_queries", "must be >= 1"))
    gates = table.get("gates")
    if gates is not None and not isinstance(gates, Mapping):
        problems.append(ConfigProblem("gates", "expected a table ([gates] with file = PATH, or checks = [...])"))
        gates = None

    raw_configs = table.get("configs", [])
    configs = _configs(raw_configs, base, problems)
    names = [c.name for c in configs]
    load = None
    if "load" in table:
        if not isinstance(table["load"], Mapping):
            problems.append(ConfigProblem("load", "expected a table ([load] with concurrency, duration, ...)"))
        else:
            load, load_problems = settings_from_table(table["load"])
            problems += load_problems
            problems += [
                ConfigProblem("load.configs", f"{c!r} is not a config name ({', '.join(names)})")
                for c in load.configs
                if names and c not in names
            ]
    if not configs:
        problems.append(ConfigProblem("configs", "at least one [[configs]] entry is required"))
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(ConfigProblem("configs", f"duplicate config name {dup!r}"))
    flagged = (
        [c.get("name", "?") for c in raw_configs if isinstance(c, Mapping) and c.get("baseline") is True]
        if isinstance(raw_configs, list)
        else []
    )
    if baseline and flagged and flagged != [baseline]:
        problems.append(
            ConfigProblem("experiment.baseline", f"{baseline!r} disagrees with baseline = true on {flagged}")
        )
    baseline = baseline or (flagged[0] if flagged else (names[0] if names else ""))
    if len(flagged) > 1:
        problems.append(ConfigProblem("configs", f"more than one baseline: {flagged}"))
    if configs and baseline not in names:
        problems.append(ConfigProblem("experiment.baseline", f"{baseline!r} is not a config name ({', '.join(names)})"))
    if batch_size is not None and batch_size < 1:
        problems.append(ConfigProblem("timing.batch_size", "must be >= 1"))
    if warmup is not None and warmup < 0:
        problems.append(ConfigProblem("timing.warmup", "must be >= 0"))
    problems.extend(_cap_problems(configs, production_cap))
    problems.extend(_name_problems("experiment.name", name))
    if uri is not None and (why := uri_problem(uri)):
        problems.append(ConfigProblem("milvus.uri", why))
    if not 0 < float(timeout) <= 3600:
        problems.append(ConfigProblem("milvus.timeout", f"must be > 0 and <= 3600 seconds, got {timeout}"))
    if query_limit is not None and query_limit < 1:
        problems.append(ConfigProblem("timing.query_limit", f"must be >= 1, got {query_limit}"))
    problems.extend(_width_problems(configs))
    if problems:
        raise ConfigError(problems, path=source)

    return Experiment(
        name=name,
        source=source,
        dataset_path=(base / ds_path_raw).resolve() if ds_path_raw else base,
        split=split,
        chunker_spec=chunker_spec,
        min_overlap_chars=min_overlap,
        embedder_model=model,
        embedder_normalize=normalize,
        cache_dir=Path(cache_dir) if cache_dir else DEFAULT_CACHE_DIR,
        vectors_dir=(base / vectors_dir).resolve() if vectors_dir else None,
        milvus_uri=uri if (uri is None or "://" in uri) else str(Path(uri)),
        collection=collection,
        token_env=token_env,
        timeout=float(timeout),
        index=index,
        profile=profile,
        configs=tuple(configs),
        baseline=baseline,
        cutoffs=tuple(sorted(set(cutoffs))),
        warmup=warmup,
        timing=timing,
        batch_size=batch_size,
        query_limit=query_limit,
        production_cap=production_cap,
        drilldown_queries=drilldown_queries,
        gates=gates,
        load=load,
    )


def _timing_plan(r: _Reader, problems: list[ConfigProblem]) -> TimingPlan:
    """``[timing]`` latency (all, sample, off), latency_sample (queries timed), latency_seed."""
    default = TimingPlan()
    mode = r.get("latency", str, default.mode.value)
    size = r.get("latency_sample", int, default.sample_size)
    seed = r.get("latency_seed", int, default.seed)
    if mode not in {m.value for m in LatencyMode}:
        problems.append(ConfigProblem("timing.latency", f"{mode!r} is not one of all, sample, off"))
        mode = default.mode.value
    if size < 1:
        problems.append(ConfigProblem("timing.latency_sample", f"must be >= 1, got {size}"))
        size = default.sample_size
    return TimingPlan(mode=LatencyMode(mode), sample_size=size, seed=seed)


_MAX_NAME = 100


def _name_problems(key: str, name: str) -> list[ConfigProblem]:
    """Experiment and config names become file and directory names: nothing that can leave ``reports/runs/``."""
    if not _SAFE_NAME.fullmatch(name) or len(name) > _MAX_NAME or name in {".", ".."}:
        return [
            ConfigProblem(
                key, f"{name!r}: up to {_MAX_NAME} letters, digits, '.', '_', '-', starting with a letter or digit"
            )
        ]
    return []


def _width_problems(configs: Sequence[ConfigSpec]) -> list[ConfigProblem]:
    return [
        ConfigProblem(
            f"configs.{c.name}", f"retrieve-k {c.config.retrieve_k:,} is over Milvus's limit of {MAX_TOPK:,} hits"
        )
        for c in configs
        if c.config.retrieve_k > MAX_TOPK
    ]


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


def _index(table: Mapping[str, Any], problems: list[ConfigProblem]) -> IndexSpec:
    r = _Reader(table, "milvus.index", problems)
    defaults = IndexSpec()
    settings = IndexSpec(
        index_type=str(r.get("type", str, defaults.index_type)).upper(),
        metric=str(r.get("metric", str, defaults.metric)).upper(),
        build_params=r.get("params", Mapping, defaults.build_params),
        search_params=r.get("search", Mapping, defaults.search_params),
    )
    r.finish()
    if settings.index_type not in INDEX_TYPES:
        problems.append(
            ConfigProblem("milvus.index.type", f"{settings.index_type!r} is not one of {', '.join(INDEX_TYPES)}")
        )
    if settings.metric not in METRICS:
        problems.append(ConfigProblem("milvus.index.metric", f"{settings.metric!r} is not one of {', '.join(METRICS)}"))
    return settings


def _profile(r: _Reader, problems: list[ConfigProblem]) -> IngestProfile:
    name = r.get("profile", str, DEFAULT_PROFILE)
    base = PROFILES.get(name)
    if base is None:
        problems.append(ConfigProblem("ingest.profile", f"unknown profile {name!r} (known: {', '.join(PROFILES)})"))
        base = PROFILES["clean"]
    changes: dict[str, Any] = {}
    for key in ("legacy_share", "missing_doc_share", "duplicate_share"):
        value = r.get(key, (int, float))
        if value is not None:
            if not 0.0 <= float(value) <= 1.0:
                problems.append(ConfigProblem(f"ingest.{key}", f"must be within [0, 1], got {value}"))
            changes[key] = float(value)
    seed = r.get("seed", int)
    if seed is not None:
        changes["seed"] = seed
    profile = replace(base, **changes)
    if changes:
        profile = replace(profile, name=f"{name}+custom")
    if profile.legacy_share + profile.missing_doc_share > 1.0:
        problems.append(ConfigProblem("ingest", "legacy_share + missing_doc_share must not exceed 1"))
    return profile


def _configs(raw: Any, base: Path, problems: list[ConfigProblem]) -> list[ConfigSpec]:
    if not isinstance(raw, list):
        problems.append(ConfigProblem("configs", "expected an array of tables ([[configs]])"))
        return []
    out: list[ConfigSpec] = []
    for i, entry in enumerate(raw):
        prefix = f"configs[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(ConfigProblem(prefix, "expected a table"))
            continue
        r = _Reader(entry, prefix, problems)
        name = r.get("name", str)
        r.get("baseline", bool)
        mode_raw = r.get("mode", str, "dense")
        props = r.get("properties", str)
        inline = r.get("rag", Mapping)
        what_if = r.get("what_if", str)
        r.finish()
        if not name or not _SAFE_NAME.fullmatch(name):
            problems.append(ConfigProblem(f"{prefix}.name", f"required; letters, digits, '.', '_', '-' only: {name!r}"))
            continue
        prefix = f"configs.{name}"
        try:
            mode = SearchMode(mode_raw)
        except ValueError:
            problems.append(ConfigProblem(f"{prefix}.mode", f"{mode_raw!r} is not one of dense, grouped, hybrid"))
            mode = SearchMode.DENSE
        if props is not None and inline is not None:
            problems.append(ConfigProblem(prefix, "give either properties = FILE or a rag table, not both"))
            continue
        try:
            if props is not None:
                config = RagConfig.from_properties_file(base / props)
                origin = str(base / props)
            else:
                config = RagConfig.from_toml_table({"rag": inline or {}}, source=None)
                origin = "inline"
        except ConfigError as err:
            if props is not None:
                where = f"{prefix} ({err.path})" if err.path else f"{prefix}"
                problems.extend(ConfigProblem(f"{where}: {p.key}", p.message) for p in err.problems)
            else:  # an inline table: name keys and suggestions as written inside `rag = { ... }`
                problems.extend(
                    ConfigProblem(f"{prefix}.rag.{p.key.removeprefix('rag.')}", _inline(p.message))
                    for p in err.problems
                )
            continue
        if what_if is not None:
            if what_if not in WHAT_IFS:
                problems.append(
                    ConfigProblem(f"{prefix}.what_if", f"{what_if!r} is not one of {', '.join(sorted(WHAT_IFS))}")
                )
                continue
            if config.pipeline.is_legacy:
                problems.append(ConfigProblem(f"{prefix}.what_if", "applies to the evidence pipeline only"))
                continue
        out.append(ConfigSpec(name=name, config=config, mode=mode, origin=origin, what_if=what_if))
    return out


def _inline(message: str) -> str:
    """A config message as a user of an inline ``rag = { ... }`` table reads it: keys without ``rag.``."""
    return re.sub(r"'rag\.([a-z0-9.-]+)'", r"'\1'", message).replace("rag settings start with 'rag.'", "rag keys")


def parse_config_flag(value: str, *, base: Path = Path()) -> ConfigSpec:
    """``NAME=FILE.properties`` or ``NAME=FILE.properties:MODE`` from the command line."""
    name, eq, rest = value.partition("=")
    if not eq or not _SAFE_NAME.fullmatch(name) or not rest:
        raise ConfigError([ConfigProblem("--config", f"expected NAME=FILE[.properties][:MODE], got {value!r}")])
    path, _, mode_raw = rest.partition(":") if not Path(rest).exists() else (rest, "", "")
    try:
        mode = SearchMode(mode_raw or "dense")
    except ValueError as exc:
        raise ConfigError([ConfigProblem("--config", f"unknown mode {mode_raw!r} in {value!r}")]) from exc
    config = RagConfig.from_properties_file(base / path)
    return ConfigSpec(name=name, config=config, mode=mode, origin=str(base / path))


def with_overrides(
    exp: Experiment,
    *,
    dataset: str | None = None,
    split: str | None = None,
    milvus_uri: str | None = None,
    collection: str | None = None,
    chunker: str | None = None,
    profile: str | None = None,
    configs: Sequence[ConfigSpec] = (),
    baseline: str | None = None,
    query_limit: int | None = None,
    latency: str | None = None,
    require_configs: bool = True,
) -> Experiment:
    """Apply CLI flags on top of a file (or of the defaults)."""
    problems: list[ConfigProblem] = []
    changes: dict[str, Any] = {}
    if dataset is not None:
        changes["dataset_path"] = Path(dataset).resolve()
        if exp.source is None:
            changes["name"] = _slug_name(Path(dataset).resolve().name)
    if split is not None:
        changes["split"] = split
    if milvus_uri is not None:
        if why := uri_problem(milvus_uri):
            problems.append(ConfigProblem("--milvus-uri", why))
        changes["milvus_uri"] = milvus_uri
    if collection is not None:
        changes["collection"] = collection
    if chunker is not None:
        try:
            parse_chunker(chunker)
        except ConfigError as err:
            problems.extend(err.problems)
        changes["chunker_spec"] = chunker
    if profile is not None:
        if profile not in PROFILES:
            problems.append(ConfigProblem("--profile", f"unknown profile {profile!r} (known: {', '.join(PROFILES)})"))
        else:
            changes["profile"] = PROFILES[profile]
    if configs:
        changes["configs"] = tuple(configs)
        names = [c.name for c in configs]
        changes["baseline"] = baseline or names[0]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.append(ConfigProblem("--config", f"config name {dup!r} is given more than once"))
        problems.extend(_width_problems(configs))
    elif baseline is not None:
        changes["baseline"] = baseline
    if query_limit is not None:
        if query_limit < 1:
            problems.append(ConfigProblem("--limit", f"must be >= 1, got {query_limit}"))
        changes["query_limit"] = query_limit
    if latency is not None:
        try:
            changes["timing"] = TimingPlan.parse(latency, exp.timing)
        except ConfigError as err:
            problems.extend(err.problems)
    new = replace(exp, **changes)
    if not new.configs and require_configs:
        problems.append(ConfigProblem("--config", "no configs: give an experiment file or --config NAME=FILE"))
    elif new.configs and new.baseline not in {c.name for c in new.configs}:
        problems.append(ConfigProblem("--baseline", f"{new.baseline!r} is not a config name"))
    problems.extend(_cap_problems(new.configs, new.production_cap))
    if problems:
        raise ConfigError(problems, path=exp.source)
    return new


def _slug_name(text: str) -> str:
    """A safe experiment name made from a directory name."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:_MAX_NAME]
    return slug if slug and slug[0].isalnum() else f"dataset-{slug}".strip("-")


def default_experiment(dataset: str, split: str = "test") -> Experiment:
    """An experiment made from flags only (no file): defaults everywhere."""
    path = Path(dataset).resolve()
    return Experiment(name=_slug_name(path.name), source=None, dataset_path=path, split=split)
