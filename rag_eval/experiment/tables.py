"""One reader per table of an experiment file: each turns its table into fields of :class:`Experiment`.

A reader checks what only the file shows (types, unknown keys, names of kinds such as a profile or
a latency mode) and returns the fields it read; the values are checked afterwards, once, by
:func:`~rag_eval.experiment.checks.check_experiment`. A new table is a reader here, an
entry in :data:`TABLES` and the fields it fills in the model.

>>> from pathlib import Path
>>> problems: list = []
>>> read_milvus(TableReader({"uri": "http://db:19530", "timeout": 5}, "milvus", problems, base=Path(".")))["timeout"]
5.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from rag_eval.core.errors import quoted
from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC
from rag_eval.embed.providers import EmbedSettings
from rag_eval.experiment.checks import CUTOFF_RULE, path_problem
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.experiment.load_table import settings_from_table
from rag_eval.experiment.model import (
    DEFAULT_CACHE_DIR,
    DEFAULT_CUTOFFS,
    DEFAULT_FUZZY_THRESHOLD,
    DEFAULT_MAX_UNRESOLVED,
    DEFAULT_PROFILE,
    MAX_CONCURRENCY,
    PROFILES,
    CollectionSpec,
    ServiceSpec,
)
from rag_eval.experiment.section import TableReader
from rag_eval.search.milvus.schema import IndexSpec, uri_problem
from rag_eval.traffic.logs import TrafficSpec

Fields = dict[str, Any]  # Experiment field -> value
TableRead = Callable[[TableReader], Fields]


def read_experiment(t: TableReader) -> Fields:
    """``[experiment]`` name, baseline (or ``baseline = true`` on a config), production_cap, payload_budget
    (false: the projector's limits lifted for every config, to measure retrieval rather than the budget)."""
    return {
        "name": t.get("name", str, "experiment"),
        "baseline": t.get("baseline", str, ""),
        "production_cap": t.get("production_cap", int),
        "payload_budget": t.get("payload_budget", bool, True),
    }


def read_dataset(t: TableReader) -> Fields:
    """``[dataset]`` path (required, relative to the file), split, min_overlap_chars."""
    path = t.path("path", required=True)
    return {
        "dataset_path": path.resolve() if path is not None else t.base,
        "split": t.get("split", str, "test"),
        "min_overlap_chars": t.get("min_overlap_chars", int, 1),
    }


def read_chunker(t: TableReader) -> Fields:
    """``[chunker]`` spec (``sentences:size=3,overlap=0``)."""
    return {"chunker_spec": t.get("spec", str, DEFAULT_CHUNKER_SPEC)}


def read_embedder(t: TableReader) -> Fields:
    """``[embedder]`` provider and its keys (:mod:`rag_eval.embed.providers`), cache_dir (an output),
    vectors_dir (an input)."""
    cache_dir = t.output_path("cache_dir")
    vectors_dir = t.path("vectors_dir")
    return {
        "embedder": embed_settings(t),
        "cache_dir": cache_dir if cache_dir is not None else DEFAULT_CACHE_DIR,
        "vectors_dir": vectors_dir.resolve() if vectors_dir is not None else None,
    }


def embed_settings(t: TableReader) -> EmbedSettings:
    """The provider's keys of ``[embedder]``; their values are checked by :func:`settings_problems`."""
    d = EmbedSettings()
    provider = t.get("provider", str, d.provider)
    number = (int, float)
    file = t.path("file")
    return EmbedSettings(
        provider=provider,
        model=t.get("model", str, d.model if provider == "sentence-transformers" else ""),
        normalize=t.get("normalize", bool, d.normalize),
        base_url=t.get("base_url", str), dimensions=t.get("dimensions", int), api_key_env=t.get("api_key_env", str),
        batch_size=t.get("batch_size", int), concurrency=t.get("concurrency", int, d.concurrency),
        requests_per_minute=t.get("requests_per_minute", number), timeout=float(t.get("timeout", number, d.timeout)),
        max_retries=t.get("max_retries", int, d.max_retries), max_texts=t.get("max_texts", int),
        file=file.resolve() if file is not None else None, callable=t.get("callable", str),
        fit_sample=t.get("fit_sample", int, d.fit_sample), fit_k=t.get("fit_k", int, d.fit_k),
        fit_min=float(t.get("fit_min", number, d.fit_min)), fit_seed=t.get("fit_seed", int, d.fit_seed),
        passage=t.get("passage", str, d.passage),
    )  # fmt: skip


def read_milvus(t: TableReader) -> Fields:
    """``[milvus]`` uri (a Lite file, relative to the experiment file, or a server), collection,
    token_env, timeout, and ``index = { type, metric, params, search }``."""
    uri = t.get("uri", str)
    if uri is not None and "://" not in uri and uri_problem(uri) is None:
        uri = str(t.beside(uri))  # a Lite file; a URI with a problem stays as written, for the check to name
    fields = {
        "milvus_uri": uri,
        "collection": t.get("collection", str),
        "token_env": t.get("token_env", str, "RAG_EVAL_MILVUS_TOKEN"),
        "timeout": float(t.get("timeout", (int, float), 10.0)),
    }
    return {**fields, "index": _index(t.sub("index"))}


def _index(t: TableReader) -> IndexSpec:
    """``index = { type, metric, params, search }``: the parameters a type has by default are its own
    (:meth:`IndexSpec.of_type`: a FLAT index has none), replaced by those written."""
    index_type = str(t.get("type", str, IndexSpec().index_type)).upper()
    defaults = IndexSpec.of_type(index_type)
    spec = IndexSpec(
        index_type=index_type,
        metric=str(t.get("metric", str, defaults.metric)).upper(),
        build_params=t.get("params", Mapping, defaults.build_params),
        search_params=t.get("search", Mapping, defaults.search_params),
    )
    t.finish()
    return spec


def read_collection(t: TableReader) -> Fields:
    """``[collection]`` name (required), load, partitions, fields (required: id, vector, text),
    max_unresolved, fuzzy_threshold: a collection built elsewhere, replayed as it is."""
    if not t.present:
        return {"existing": None}
    name = t.get("name", str)
    if not name or not name.strip():
        t.problem("name", "required: the collection to replay")
    fields = t.get("fields", Mapping, {})
    bad = [k for k, v in fields.items() if not isinstance(v, str)]
    for key in bad:
        t.problem(f"fields.{key}", f"expected a field name (text), got {quoted(fields[key])}")
    partitions = t.get("partitions", list, [])
    if not all(isinstance(p, str) and p.strip() for p in partitions):
        t.problem("partitions", f"expected partition names, got {quoted(partitions)}")
        partitions = []
    max_unresolved = t.get("max_unresolved", (int, float), DEFAULT_MAX_UNRESOLVED)
    threshold = t.get("fuzzy_threshold", (int, float), DEFAULT_FUZZY_THRESHOLD)
    spec = CollectionSpec(
        name=name or "",
        fields={k: v for k, v in fields.items() if k not in bad},
        load=t.get("load", bool),
        partitions=tuple(partitions),
        max_unresolved=float(max_unresolved),
        fuzzy_threshold=float(threshold),
    )
    return {"existing": spec}


def read_ingest(t: TableReader) -> Fields:
    """``[ingest]`` profile (a name of :data:`PROFILES`) and explicit shares or seed on top of it; without a
    profile named, the reader lets the data set choose it (:func:`~rag_eval.experiment.model.default_profile`)."""
    named = t.get("profile", str) is not None
    name = t.get("profile", str, DEFAULT_PROFILE)
    base = PROFILES.get(name)
    if base is None:
        t.problem("profile", f"unknown profile {quoted(name)} (known: {', '.join(PROFILES)})")
        base = PROFILES["clean"]
    changes: dict[str, Any] = {}
    for key in ("legacy_share", "missing_doc_share", "duplicate_share"):
        value = t.get(key, (int, float))
        if value is not None:
            changes[key] = float(value)
    seed = t.get("seed", int)
    if seed is not None:
        changes["seed"] = seed
    profile = replace(base, **changes)
    return {"profile": replace(profile, name=f"{name}+custom") if changes else profile, "profile_named": named}


def read_metrics(t: TableReader) -> Fields:
    """``[metrics]`` cutoffs (the k of P@k, R@k, nDCG@k, Success@k), lead (the cutoffs, or one, that the
    console shows and the report leads with)."""
    cutoffs = t.get("cutoffs", list, list(DEFAULT_CUTOFFS))
    if not _integers(cutoffs):
        t.problem("cutoffs", f"expected integers, got {quoted(cutoffs)}: {CUTOFF_RULE}")
        cutoffs = list(DEFAULT_CUTOFFS)
    lead = t.get("lead", (int, list), [])
    lead = [lead] if isinstance(lead, int) else lead
    if not _integers(lead):
        t.problem("lead", f"expected a cutoff or a list of them, got {quoted(lead)}")
        lead = []
    # duplicates kept, for the check to name
    return {"cutoffs": tuple(sorted(cutoffs)), "lead_cutoffs": tuple(lead)}


def _integers(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in values)


def read_timing(t: TableReader) -> Fields:
    """``[timing]`` warmup, batch_size, query_limit, and latency (all, sample, off), latency_sample
    (queries timed), latency_seed."""
    default = TimingPlan()
    fields = {
        "warmup": t.get("warmup", int, 5),
        "batch_size": t.get("batch_size", int, 64),
        "query_limit": t.get("query_limit", int),
    }
    mode = t.get("latency", str, default.mode.value)
    size = t.get("latency_sample", int, default.sample_size)
    seed = t.get("latency_seed", int, default.seed)
    if mode not in {m.value for m in LatencyMode}:
        t.problem("latency", f"{quoted(mode)} is not one of all, sample, off")
        mode = default.mode.value
    return {**fields, "timing": TimingPlan(mode=LatencyMode(mode), sample_size=size, seed=seed)}


def read_traffic(t: TableReader) -> Fields:
    """``[traffic]`` path (required: a query log or a trace export, relative to the file), format, text, id,
    category, sample, seed, max_chars, show_text: production queries without labels, replayed beside the data
    set's (docs/traffic.md); the values are checked by :func:`rag_eval.traffic.logs.spec_problems`."""
    if not t.present:
        return {"traffic": None}
    path = t.path("path", required=True)
    fmt = t.get("format", str)
    texts = {key: t.get(key, str) for key in ("text", "id", "category")}
    sample, max_chars = t.get("sample", int), t.get("max_chars", int, 4096)
    text = "query" if texts["text"] is None else texts["text"]  # given blank: refused, never the default
    spec = TrafficSpec(
        path=path.resolve() if path is not None else t.base, format=fmt, text=text, id=texts["id"],
        category=texts["category"], sample=sample, seed=t.get("seed", int, 0), max_chars=max_chars,
        show_text=t.get("show_text", bool, True),
    )  # fmt: skip
    return {"traffic": spec}


def read_service(t: TableReader) -> Fields:
    """``[service]`` url (MCP, streamable HTTP), command (an MCP server over stdio), or http (plain JSON), and
    config, timeout, concurrency: a deployed lookup_knowledge replayed as a black box (docs/serve.md)."""
    if not t.present:
        return {"service": None}
    command = t.get("command", list, [])
    if not all(isinstance(a, str) for a in command):
        t.problem("command", "expected a list of strings (the program and its arguments)")
        command = []
    spec = ServiceSpec(
        url=t.get("url", str), command=tuple(command), http=t.get("http", str), config=t.get("config", str, ""),
        timeout=float(t.get("timeout", (int, float), 30.0)), concurrency=t.get("concurrency", int, 4),
    )  # fmt: skip
    given = [k for k, v in (("url", spec.url), ("command", spec.command), ("http", spec.http)) if v]
    if len(given) != 1:
        t.problem("url", f"give one of url, command or http (given: {', '.join(given) or 'none'})")
    for key, value in (("url", spec.url), ("http", spec.http)):
        if value and not value.startswith(("http://", "https://")):
            t.problem(key, f"expected an http(s):// URL, got {quoted(value)}")
    if not 0 < spec.timeout <= 3600:
        t.problem("timeout", f"must be > 0 and <= 3600 seconds, got {spec.timeout:g}")
    if not 1 <= spec.concurrency <= MAX_CONCURRENCY:
        t.problem("concurrency", f"1 to {MAX_CONCURRENCY} queries in flight at once, got {spec.concurrency}")
    return {"service": spec}


def read_report(t: TableReader) -> Fields:
    """``[report]`` drilldown_queries (queries in the HTML report's drill-down)."""
    return {"drilldown_queries": t.get("drilldown_queries", int)}


def read_gates(t: TableReader) -> Fields:
    """``[gates]`` as written (``file = ...`` or ``checks = [...]``): :mod:`rag_eval.compare` reads it,
    after the file name is known to be one."""
    if not t.present:
        return {"gates": None}
    gates = t.whole()
    if isinstance(gates.get("file"), str) and (why := path_problem(gates["file"])):
        t.problem("file", why)
    return {"gates": gates}


def read_load(t: TableReader) -> Fields:
    """``[load]``: see :mod:`rag_eval.experiment.load_table`."""
    if not t.present:
        return {"load": None}
    settings, problems = settings_from_table(t.whole())
    t.problems.extend(problems)
    return {"load": settings}


# The tables of an experiment file and their readers, in the order their problems are reported
# ([[configs]], an array of tables, is read by rag_eval.experiment.configs_table).
TABLES: Mapping[str, TableRead] = {
    "experiment": read_experiment,
    "dataset": read_dataset,
    "chunker": read_chunker,
    "embedder": read_embedder,
    "milvus": read_milvus,
    "collection": read_collection,
    "ingest": read_ingest,
    "metrics": read_metrics,
    "timing": read_timing,
    "report": read_report,
    "gates": read_gates,
    "load": read_load,
    "traffic": read_traffic,
    "service": read_service,
}
# What a table that is not one should look like, where a hint helps
SHAPES: Mapping[str, str] = {
    "gates": "expected a table ([gates] with file = PATH, or checks = [...])",
    "load": "expected a table ([load] with concurrency, duration, ...)",
    "collection": "expected a table ([collection] with name = ..., fields = { id = ..., vector = ..., text = ... })",
    "traffic": "expected a table ([traffic] with path = ..., text = ...)",
}
