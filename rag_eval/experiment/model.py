"""The experiment as a value: which data set, chunker, embedder, Milvus, ingest profile and configs.

:class:`Experiment` is what a run is given, whether it was read from a file
(:mod:`rag_eval.experiment.reader`), made from flags
(:mod:`rag_eval.experiment.overrides`) or built in code; its values are checked in one place
(:func:`rag_eval.experiment.checks.check_experiment`).

>>> spec = ConfigSpec(name="evidence", config=RagConfig())
>>> exp = Experiment(name="kb", source=None, dataset_path=Path("/data/kb"), split="test", configs=(spec,),
...                  baseline="evidence")
>>> exp.resolved_uri, exp.checked_cap(spec)
('reports/milvus/kb.db', (2, 'config'))
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import PostProcessor
from rag_eval.core.types import SearchMode
from rag_eval.datasets.beir import corpus_has_metadata
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC
from rag_eval.embed.providers import EmbedSettings
from rag_eval.experiment.latency import TimingPlan
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.experiment.whatif import WHAT_IFS
from rag_eval.search.milvus.schema import IndexSpec, SearchTarget, redact_uri
from rag_eval.traffic.logs import TrafficSpec

DEFAULT_LITE_DIR = Path("reports/milvus")
DEFAULT_CACHE_DIR = Path("reports/cache/embeddings")
DEFAULT_CUTOFFS = (1, 3, 5, 10)
MAX_NAME = 100  # characters of an experiment name (a slug made from a directory name is cut there)

UNLIMITED = 2**31 - 1  # a projector limit lifted (Java's Integer.MAX_VALUE: what a .properties file can hold)

DEFAULT_FUZZY_THRESHOLD = 90.0  # the partial-ratio score (0-100) a fuzzy location of a stored row needs


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


DEFAULT_PROFILE = "production"  # rows as production has them, for a data set whose documents carry metadata
PROFILES: Mapping[str, IngestProfile] = {
    "clean": IngestProfile(),
    "production": IngestProfile(
        name="production", legacy_share=0.10, missing_doc_share=0.05, duplicate_share=0.10, seed=7
    ),
}


def lifted_budget(config: RagConfig) -> RagConfig:
    """``config`` with the projector's limits lifted (``[experiment] payload_budget = false``).

    >>> lifted_budget(RagConfig()).as_properties()["rag.projector.max-excerpt-chars"]
    '2147483647'
    """
    return replace(config, max_excerpt_chars=UNLIMITED, max_total_chars=UNLIMITED, max_blocks=UNLIMITED)


def default_profile(dataset_path: Path) -> IngestProfile:
    """The profile of an experiment that names none: ``production`` (re-ingested copies, rows without
    doc_id or chunk_index: the shipped comparison is about them) when the data set's documents carry
    metadata as a production export does, ``clean`` for a plain BEIR corpus (a benchmark: its rows as the
    data set has them)."""
    return PROFILES[DEFAULT_PROFILE if corpus_has_metadata(dataset_path) else "clean"]


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


DEFAULT_MAX_UNRESOLVED = 0.05  # share of a collection's fetched rows that may stay unlocated


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionSpec:
    """The ``[collection]`` table: a collection built elsewhere, replayed as it is (never written).

    ``fields`` maps the port's hit values onto the collection's fields as written (``id``, ``vector``,
    ``text`` required; ``doc_id``, ``chunk_index``, ``title``, ``source``, ``category``, ``start``,
    ``end`` optional; a field, ``json_field.key`` or a dynamic field); it is read against the
    collection's schema before any query. ``load``: load a collection that is not loaded (None: yes on a
    Milvus Lite file, whose load state never outlives its process; no on a server).
    """

    name: str
    fields: Mapping[str, str]
    load: bool | None = None
    partitions: tuple[str, ...] = ()
    max_unresolved: float = DEFAULT_MAX_UNRESOLVED
    fuzzy_threshold: float = DEFAULT_FUZZY_THRESHOLD

    def loads(self, *, server: bool) -> bool:
        """Whether a run may load the collection (see ``load``)."""
        return self.load if self.load is not None else not server

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "fields": dict(self.fields), "load": self.load, "partitions": list(self.partitions),
            "max_unresolved": self.max_unresolved, "fuzzy_threshold": self.fuzzy_threshold,
        }  # fmt: skip


# queries in flight at once against a service ([service]), lookups at once in one (rag-eval serve): each holds a
# connection or a worker thread, so a typo's 100000 would open sockets and threads until the process runs out
MAX_CONCURRENCY = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSpec:
    """The ``[service]`` table: a deployed ``lookup_knowledge`` replayed as a black box beside the configs.

    One of ``url`` (MCP over streamable HTTP), ``command`` (an MCP server started over stdio) or ``http`` (a
    plain endpoint: POST ``{"query": ...}``, the payload JSON back); ``config`` is the experiment's config the
    service is meant to run (its conformance is diffed against it; empty: the baseline).
    """

    url: str | None = None
    command: tuple[str, ...] = ()
    http: str | None = None
    config: str = ""
    timeout: float = 30.0  # seconds one query may take
    concurrency: int = 4  # queries in flight at once

    @property
    def endpoint(self) -> str:
        """Where the service is, as messages and reports show it (no credentials)."""
        if self.command:
            return " ".join(self.command)
        return redact_uri(self.url or self.http or "")

    def as_dict(self) -> dict[str, Any]:
        kind = "mcp" if self.url else "mcp-stdio" if self.command else "http"
        return {"kind": kind, "endpoint": self.endpoint, "config": self.config, "timeout": self.timeout,
                "concurrency": self.concurrency}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """Everything a run needs to know, from the data set to the gates; built unchecked (see
    :func:`rag_eval.experiment.checks.check_experiment`)."""

    name: str
    source: str | None  # the TOML file, None when built from flags only
    dataset_path: Path
    split: str
    chunker_spec: str = DEFAULT_CHUNKER_SPEC
    min_overlap_chars: int = 1
    embedder: EmbedSettings = field(default_factory=EmbedSettings)  # the [embedder] table: provider, model, ...
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
    existing: CollectionSpec | None = None  # the [collection] table: replay a collection built elsewhere
    traffic: TrafficSpec | None = None  # the [traffic] table: production queries without labels, replayed too
    service: ServiceSpec | None = None  # the [service] table: a deployed lookup_knowledge replayed and diffed
    payload_budget: bool = True  # False: every config's projector limits lifted (measure retrieval, not the budget)
    profile_named: bool = True  # False: no profile was named, the data set chose it (default_profile)
    lead_cutoffs: tuple[int, ...] = ()  # the cutoffs the console and the report lead with (): 5, else the largest

    def __post_init__(self) -> None:
        if not self.payload_budget:  # every way an experiment is made (a file, flags, replace) lifts them
            lifted = tuple(replace(c, config=lifted_budget(c.config)) for c in self.configs)
            object.__setattr__(self, "configs", lifted)

    @property
    def leading_cutoffs(self) -> tuple[int, ...]:
        """The cutoffs the console table shows and the report leads with: ``[metrics] lead`` (or ``--cutoffs``),
        else 5 when measured, else the largest measured."""
        if self.lead_cutoffs:
            return self.lead_cutoffs
        return (5,) if 5 in self.cutoffs or not self.cutoffs else (max(self.cutoffs),)

    @property
    def embedder_model(self) -> str:
        return self.embedder.model

    @property
    def embedder_normalize(self) -> bool:
        return self.embedder.normalize

    @property
    def embedder_identity(self) -> list[Any]:
        """The embedder as a run's identity names it (a local model: as it always did)."""
        extra = [] if self.embedder.provider == "sentence-transformers" else [self.embedder.model_id]
        passage = [] if self.embedder.passage == "text" else [self.embedder.passage]
        return [self.embedder_model, self.embedder_normalize, *extra, *passage]

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
        return str(DEFAULT_LITE_DIR / f"{slug_name(self.dataset_path.name)}.db")

    @property
    def target(self) -> SearchTarget:
        """Where this experiment searches (the collection is None until the ingest names it; a collection
        built elsewhere is searched with the index it has)."""
        if self.existing is not None:
            return SearchTarget(uri=self.resolved_uri, collection=self.existing.name, index=None,
                                token_env=self.token_env, timeout=self.timeout)  # fmt: skip
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
            "embedder": self.embedder_identity,
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
            **({"existing": self.existing.as_dict()} if self.existing is not None else {}),
            **({"traffic": self.traffic.as_dict()} if self.traffic is not None else {}),
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
            "embedder": self.embedder.as_dict(),
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
            "payload_budget": self.payload_budget,
            "baseline": self.baseline,
            "cutoffs": list(self.cutoffs),
            "lead_cutoffs": list(self.lead_cutoffs),  # as named ([metrics] lead, --cutoffs): the report leads with them
            "warmup": self.warmup,
            "timing": self.timing.as_dict(),
            "batch_size": self.batch_size,
            "query_limit": self.query_limit,
            "report": {"drilldown_queries": self.drilldown_queries},
            "gates": dict(self.gates) if self.gates is not None else None,
            "load": self.load.as_dict() if self.load is not None else None,
            "collection": self.existing.as_dict() if self.existing is not None else None,
            "traffic": self.traffic.as_dict() if self.traffic is not None else None,
            "service": self.service.as_dict() if self.service is not None else None,
        }


def slug_name(text: str) -> str:
    """A safe experiment name made from a directory name.

    >>> slug_name("my data set"), slug_name(".hidden")
    ('my-data-set', 'hidden')
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:MAX_NAME]
    return slug if slug and slug[0].isalnum() else f"dataset-{slug}".strip("-")
