"""The step that stands in for ingest when an experiment names a collection built elsewhere.

Before any query it checks the collection as it is (fields, index, load state, partitions, dimension), then
resolves the labels onto its rows (:mod:`rag_eval.existing.resolution`) and refuses a run whose labels no
longer fit, rather than measure against them. Each problem is one ``ConfigError`` naming its ``[collection]``
key (exit 2); nothing is ever created, written, indexed, compacted or dropped. The resolution is kept under a
fingerprint of what it came from. The checks and the cache: docs/existing-collection.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval.core.errors import (
    CollectionNotFoundError,
    CollectionNotLoadedError,
    ConfigError,
    ConfigProblem,
    EmbedderUnavailableError,
    quoted,
)
from rag_eval.core.parsing import parse_json
from rag_eval.core.types import KnowledgeSearchRequest
from rag_eval.datasets.beir import Dataset
from rag_eval.datasets.labels import chunk_qrels
from rag_eval.embed.embedders import VectorResolver
from rag_eval.embed.fit import FitResult, sample_rows, self_retrieved
from rag_eval.existing.locate import How, Location, StoredRow
from rag_eval.existing.resolution import Resolution, from_locations, labelled_documents, resolve
from rag_eval.experiment import CollectionSpec, Experiment
from rag_eval.files import write_json
from rag_eval.ingest.collection import IngestResult
from rag_eval.search.milvus.existing import CollectionInfo, ForeignCollection
from rag_eval.search.milvus.fields import FieldMap, FieldMapError, parse_field_map
from rag_eval.search.milvus.lite import read_only_problem
from rag_eval.search.milvus.schema import SearchTarget
from rag_eval.search.milvus.search import MilvusSearch

CACHE_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Existing:
    """A collection built elsewhere, checked and labelled: what the later steps search and measure."""

    target: SearchTarget
    spec: CollectionSpec
    fields: FieldMap
    info: CollectionInfo
    resolution: Resolution
    fingerprint: str
    drift: dict[str, Any] | None  # labels moved since the previous resolution (None: none kept)
    cached: bool  # the resolution was read back (same fingerprint)
    load: bool  # whether the search may load the collection
    fit: FitResult | None = None  # the [embedder]'s self-retrieval on the collection

    def as_ingested(self) -> IngestResult:
        """The collection as the ingest step's result: searched as it is, read through its field map."""
        reason = "built elsewhere, replayed as it is (read only)"
        return IngestResult(target=self.target, manifest=self.provenance(), reused=True, rows=self.info.rows,
                            embedded=0, seconds=0.0, reason=reason)  # fmt: skip

    def provenance(self) -> dict[str, Any]:
        """The collection, its schema, index, row count and fingerprint, for the manifest and summary."""
        return {**self.info.as_dict(), "fingerprint": self.fingerprint, "fields": self.fields.as_table(),
                "partitions_searched": list(self.spec.partitions)}  # fmt: skip

    def document(self) -> dict[str, Any]:
        """``resolution.json``: the report, and where every row read was located (or that it was not)."""
        rows = [{"pk": loc.pk, "stored_doc_id": loc.stored_doc_id, "doc_id": loc.doc_id, "start": loc.start,
                 "end": loc.end, "how": loc.how.value, "score": loc.score, "placed_by_rule": loc.ambiguous,
                 "chunk": self.resolution.chunk_of.get(loc.pk)} for loc in self.resolution.locations]  # fmt: skip
        return {**self.report(), "evidence_not_in_collection": sorted(self.resolution.uncovered), "locations": rows}

    def report(self) -> dict[str, Any]:
        """The resolution report (``summary.json``'s ``resolution``, and the report's section)."""
        return {
            **self.resolution.report(),
            "collection": self.info.name,
            "fingerprint": self.fingerprint,
            "max_unresolved": self.spec.max_unresolved,
            "fuzzy_threshold": self.spec.fuzzy_threshold,
            "from_cache": self.cached,
            "label_drift": self.drift,
            "embedder_fit": self.fit.as_dict() if self.fit is not None else None,
        }


def _problem(key: str, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(f"collection.{key}", message)])


def open_existing(exp: Experiment, *, load: bool) -> ForeignCollection:
    """The experiment's collection, opened to be read; a missing or unloaded one is the user's to fix."""
    spec = exp.existing
    assert spec is not None
    if not exp.target.is_server and (why := read_only_problem(exp.target.uri)):  # opening it would create one
        raise ConfigError([ConfigProblem("milvus.uri", f"{exp.target.uri} {why}")])
    try:
        return ForeignCollection(exp.target, load=load)
    except CollectionNotFoundError as exc:
        raise _problem("name", f"{exc}: name one that exists (rag-eval inspect URI lists them)") from exc
    except CollectionNotLoadedError as exc:
        raise _problem(
            "load",
            f"collection {quoted(spec.name)} is not loaded: load it, or set load = true (loading changes no data)",
        ) from exc


def field_map(spec: CollectionSpec, info: CollectionInfo, *, query_dim: int) -> FieldMap:
    """The ``fields`` table read against the collection's schema, with the vector field's index and
    dimension checked."""
    try:
        fields = parse_field_map(spec.fields, schema=info.schema(), dynamic=info.dynamic)
    except FieldMapError as exc:
        raise _problem(f"fields.{exc.key}", str(exc)) from exc
    if info.index_of(fields.vector) is None:
        raise _problem("fields.vector", f"field {fields.vector!r} has no index: the collection cannot be searched")
    dim = info.dim(fields.vector)
    if dim != query_dim:
        raise _problem(
            "fields.vector",
            f"field {fields.vector!r} holds {dim}-d vectors but the query vectors are {query_dim}-d: give the "
            "[embedder] the collection was embedded with",
        )
    missing = [p for p in spec.partitions if p not in info.partitions]
    if missing:
        raise _problem("partitions", f"no partition {quoted(missing[0])} (partitions: {', '.join(info.partitions)})")
    return fields


def fingerprint(info: CollectionInfo, rows: Sequence[StoredRow]) -> str:
    """Row count, schema, and every labelled row's key and text: what a resolution depends on."""
    digest = hashlib.sha256(f"{info.rows}\0{info.schema_digest()}\0".encode())
    for row in sorted(rows, key=lambda r: r.pk):
        digest.update(f"{row.pk}\0{row.doc_id}\0{row.chunk_index}\0{row.start}\0{row.end}\0{row.text}\0".encode())
    return digest.hexdigest()[:16]


def fingerprint_now(exp: Experiment, dataset: Dataset, existing: Existing) -> str:
    """The collection's :func:`fingerprint` taken again, as :func:`resolve_existing` took it: what the end of a
    replay compares with the one it started with (rows inserted or deleted meanwhile change it)."""
    with open_existing(exp, load=existing.load) as coll:
        return fingerprint(coll.info, read_rows(coll, existing.fields, existing.spec, dataset))


def read_rows(coll: ForeignCollection, fields: FieldMap, spec: CollectionSpec, dataset: Dataset) -> list[StoredRow]:
    """Every row of a labelled document, and every row without a doc id, once each."""
    seen: dict[str, StoredRow] = {}
    for row in coll.rows(fields, spec.partitions).of_documents(labelled_documents(dataset)):
        seen.setdefault(row.pk, row)
    return list(seen.values())


def resolve_existing(
    exp: Experiment, dataset: Dataset, *, query_dim: int, cache_dir: Path, load: bool,
    resolver: VectorResolver | None = None,
) -> Existing:  # fmt: skip
    """Preflight, read the labelled rows, check the embedder fits (with ``resolver``), resolve their labels
    (or read them back), check the share."""
    spec = exp.existing
    assert spec is not None
    with open_existing(exp, load=load) as coll:
        fields = field_map(spec, coll.info, query_dim=query_dim)
        _check_values(fields, coll.sample(SAMPLE_ROWS))
        rows = read_rows(coll, fields, spec, dataset)
        info = coll.info
    if not rows:
        raise _problem("name", f"collection {spec.name!r} has no row of any labelled document and none without "
                       "a doc id: check fields.doc_id names the data set's document ids")  # fmt: skip
    target = exp.target.reading(fields, spec.partitions)
    key = fingerprint(info, rows)
    store = ResolutionCache(cache_dir, exp, dataset)
    previous = store.latest()
    cached = previous is not None and previous.get("fingerprint") == key
    if previous is not None and cached:
        resolution = from_locations(dataset, [_location(v) for v in previous["locations"]],
                                    min_overlap_chars=exp.min_overlap_chars)  # fmt: skip
    else:
        resolution = resolve(dataset, rows, fuzzy_threshold=spec.fuzzy_threshold,
                             min_overlap_chars=exp.min_overlap_chars)  # fmt: skip
    _check(spec, resolution)
    # the labels fit: now whether the embedder does (it sends texts, so it comes after the free checks)
    fit = embedder_fit(exp, target, rows, resolver, load=load) if resolver is not None else None
    labels = _labels(dataset, resolution, exp.min_overlap_chars)
    drift = None if previous is None or cached else label_drift(previous.get("labels", {}), labels)
    if not cached:
        store.write(key, resolution, labels)
    return Existing(target=target, spec=spec, fields=fields, info=info, resolution=resolution, fingerprint=key,
                    drift=drift, cached=cached, load=load, fit=fit)  # fmt: skip


def embedder_fit(
    exp: Experiment, target: SearchTarget, rows: Sequence[StoredRow], resolver: VectorResolver, *, load: bool
) -> FitResult:
    """The stored text of a seeded sample of ``rows`` embedded with the ``[embedder]`` and searched: how many
    find themselves (:mod:`rag_eval.embed.fit`); refused under ``fit_min``. Not checked where no model can embed
    the rows: precomputed query vectors, or a local model that is not installed here (the query vectors
    then all came from the data set's precomputed files of that model)."""
    s = exp.embedder
    sample = sample_rows([(r.pk, r.text) for r in rows], s.fit_sample, s.fit_seed)
    texts = [text for _, text in sample]
    why = "precomputed query vectors: no model to embed the rows with" if s.provider == "precomputed" else None
    if why is None:
        try:
            resolver.resolve(texts)
        except EmbedderUnavailableError as exc:
            if s.provider != "sentence-transformers":
                raise
            why = f"the rows cannot be embedded here ({exc})"
    if why is not None:
        resolver.notice(f"the [embedder] fit check did not run: {why}")
        return FitResult.skipped(why, model_id=s.model_id, k=s.fit_k, minimum=s.fit_min, seed=s.fit_seed)

    def encode(batch: Sequence[str]) -> list[list[float]]:
        return [v.tolist() for v in resolver.resolve(batch)]

    with MilvusSearch(target, encode, load=load) as port:
        hits = port.search_batch([KnowledgeSearchRequest(query=t, top_k=s.fit_k) for t in texts])
    found = self_retrieved(sample, [[(h.id, h.content) for h in row] for row in hits], k=s.fit_k)
    fit = FitResult(sampled=len(sample), found=found, k=s.fit_k, minimum=s.fit_min, seed=s.fit_seed,
                    model_id=s.model_id)  # fmt: skip
    if not fit.fits:
        assert exp.existing is not None
        raise ConfigError([ConfigProblem("embedder.fit_min", fit.message(exp.existing.name))])
    return fit


SAMPLE_ROWS = 200  # rows a mapping is tried on before anything is read


def _check_values(fields: FieldMap, sample: Sequence[Mapping[str, Any]]) -> None:
    """A mapped value no sampled row has (a JSON path into nothing, a dynamic key never written) is a
    mapping mistake, not a collection without that value: refused, naming the key."""
    if not sample:
        return
    for key, ref in fields.refs().items():
        if all(ref.read(row) is None for row in sample):
            raise _problem(f"fields.{key}", f"{ref.spec!r} has no value in any of the {len(sample)} rows looked at: "
                           "check the field name and path (rag-eval inspect shows the rows)")  # fmt: skip


def _check(spec: CollectionSpec, resolution: Resolution) -> None:
    located = resolution.rows - resolution.unresolved
    if located == 0:
        raise _problem("fields.text", f"none of the {resolution.rows:,} rows read could be located in the source "
                       "documents: check fields.text and the data set")  # fmt: skip
    if resolution.unresolved_share > spec.max_unresolved:
        raise _problem(
            "max_unresolved",
            f"{resolution.unresolved:,} of {resolution.rows:,} rows ({resolution.unresolved_share:.1%}) could not be "
            f"located in the source documents, over the {spec.max_unresolved:.1%} allowed: the labels no longer "
            "fit this collection (raise max_unresolved to measure anyway)",
        )


def _labels(dataset: Dataset, resolution: Resolution, min_overlap_chars: int) -> dict[str, list[list[Any]]]:
    """Each query's relevant ranges: [doc, start, end, grade], sorted (what label drift compares)."""
    ranges = {c.key: (c.doc_id, c.start, c.end) for c in resolution.corpus.chunks}
    qrels = chunk_qrels(dataset, resolution.corpus, min_overlap_chars=min_overlap_chars)
    return {q: sorted([*ranges[k], g] for k, g in grades.items()) for q, grades in sorted(qrels.relevance.items())}


def label_drift(before: Mapping[str, Sequence[Sequence[Any]]], after: Mapping[str, Sequence[Sequence[Any]]]
                ) -> dict[str, Any]:  # fmt: skip
    """How the labels moved between two resolutions: labels (query, range) added and removed, and the
    queries whose labels changed.

    >>> label_drift({"q": [["d", 0, 10, 1]]}, {"q": [["d", 0, 12, 1]], "r": [["d", 5, 9, 1]]})
    {'labels_before': 1, 'labels_after': 2, 'added': 2, 'removed': 1, 'queries_changed': 2}
    """
    old = {(q, *map(str, r)) for q, rs in before.items() for r in rs}
    new = {(q, *map(str, r)) for q, rs in after.items() for r in rs}
    changed = {q for q in set(before) | set(after) if sorted(map(list, before.get(q, []))) != sorted(
        map(list, after.get(q, [])))}  # fmt: skip
    return {"labels_before": len(old), "labels_after": len(new), "added": len(new - old), "removed": len(old - new),
            "queries_changed": len(changed)}  # fmt: skip


class ResolutionCache:
    """Resolutions of one collection against one data set split, newest last, one JSON file each."""

    def __init__(self, root: Path, exp: Experiment, dataset: Dataset) -> None:
        assert exp.existing is not None
        ident = json.dumps([exp.target.redacted_uri, exp.existing.name, dataset.checksum, dataset.split,
                            exp.existing.fields, exp.min_overlap_chars, exp.existing.fuzzy_threshold])  # fmt: skip
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", exp.existing.name)[:60]
        self.dir = root / f"{slug}-{hashlib.sha256(ident.encode()).hexdigest()[:12]}"

    def latest(self) -> dict[str, Any] | None:
        try:
            pointer = parse_json((self.dir / "latest.json").read_text(encoding="utf-8"))
            path = self.dir / f"{pointer['fingerprint']}.json"
            found: dict[str, Any] = parse_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return found if found.get("version") == CACHE_VERSION else None

    def write(self, key: str, resolution: Resolution, labels: Mapping[str, Any]) -> None:
        body = {"version": CACHE_VERSION, "fingerprint": key, "report": resolution.report(), "labels": labels,
                "locations": [_cached(loc) for loc in resolution.locations]}  # fmt: skip
        write_json(self.dir / f"{key}.json", body)
        write_json(self.dir / "latest.json", {"fingerprint": key})


def _cached(loc: Location) -> list[Any]:
    return [loc.pk, loc.stored_doc_id, loc.doc_id, loc.start, loc.end, loc.how.value, loc.score,
            loc.offsets_disagreed, loc.ambiguous]  # fmt: skip


def _location(v: Sequence[Any]) -> Location:
    pk, stored, doc, start, end, how, score, disagreed, ambiguous = v
    return Location(pk=str(pk), stored_doc_id=stored, doc_id=doc, start=int(start), end=int(end), how=How(how),
                    score=float(score), offsets_disagreed=bool(disagreed), ambiguous=bool(ambiguous))  # fmt: skip
