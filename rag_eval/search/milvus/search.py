r"""The search port: :class:`MilvusSearch` answers KnowledgeSearchRequests from a rag_eval collection.

It answers alike on every backend and run: missing values map back to ``None``, a filter never widens the
result, higher scores are better for every metric, hits come in one total order (ties at the cut-off resolved
by searching wider), and a backend that would silently ignore grouping is refused. How each is done:
docs/harness.md, "The search/milvus/ package".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rag_eval.core.errors import (
    CollectionNotLoadedError,
    ConfigError,
    ConfigProblem,
    DimensionMismatchError,
    FilterError,
    SearchRequestError,
    UnsupportedFeatureError,
    quoted,
)
from rag_eval.core.ports import PortBase
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode, hit_order
from rag_eval.search.milvus.collection import (
    collection_of,
    describe,
    ensure_loaded,
    search_params,
    stored_index,
)
from rag_eval.search.milvus.connection import Connection
from rag_eval.search.milvus.existing import foreign_collection, foreign_hit
from rag_eval.search.milvus.hits import HitReader, IdPage, id_page, in_total_order
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.probes import probe_grouping, probe_hybrid, probe_query_cache, probe_templating
from rag_eval.search.milvus.quoting import milvus_string_literal
from rag_eval.search.milvus.readiness import settle
from rag_eval.search.milvus.schema import (
    DEFAULT_CALL_TIMEOUT,
    MAX_NQ,
    MAX_TOPK,
    MISSING_STR,
    OUTPUT_FIELDS,
    SPARSE_FIELD,
    VECTOR_FIELD,
    BackendFeatures,
    ModeSupport,
    SearchTarget,
)

BatchEncoder = Callable[[Sequence[str]], Sequence[Sequence[float]]]
ROWS_A_QUERY = 4096  # ids a query by id asks for (a search call's pages bring at most 16,384 rows)
_GroupKey = tuple[SearchMode, int, str | None, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    """What every search call of one group of requests shares, whatever its width: the mode, the filter
    (expression and template values, and the category its hits are checked against), the group size, and
    whether the hits come as ids and scores only (their rows read once: :meth:`MilvusSearch._read_rows`)."""

    mode: SearchMode
    expr: str
    params: dict[str, str] | None
    group_size: int
    category: str | None = None
    by_id: bool = False


class MilvusSearch(PortBase):
    """KnowledgeSearchPort over a rag_eval collection: DENSE, GROUPED and HYBRID where really supported.

    ``encoder`` turns query texts into vectors. Opening connects, checks the target's collection and its
    index against the target's ``index`` (None: the one recorded at create), and loads it (unless
    ``load=False``); errors are the project's own. ``fixed_rows``: the collection's rows do not change while
    the port is open (a replay's, which refuses a collection that changed under it): a DENSE
    :meth:`search_batch` of a rag_eval collection then asks Milvus for ids and scores only, and each row's
    fields are read once, by a query by id, and kept (the same hits, without every page carrying every row's
    fields again); :meth:`search` searches as the agent tool does.

    >>> import tempfile
    >>> from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusStore
    >>> tmp = tempfile.TemporaryDirectory()
    >>> target = SearchTarget(uri=f"{tmp.name}/milvus.db", collection="kb", index=IndexSpec.flat())
    >>> with MilvusStore(target) as store:
    ...     store.create(dim=2, index=IndexSpec.flat(), manifest={})
    ...     inserted = store.insert(
    ...         ChunkRow(vector_id=i + 1, doc_id="lag", chunk_index=i, content=f"chunk {i}", title="", source="",
    ...                  category="db", start=None, end=None, vector=vector)
    ...         for i, vector in enumerate([[1.0, 0.0], [0.6, 0.8]]))
    ...     store.finalize()
    >>> with MilvusSearch(target, encoder=lambda texts: [[0.8, 0.6] for _ in texts]) as port:
    ...     hits = port.search(KnowledgeSearchRequest(query="replica lag", top_k=10))
    >>> [(h.id, h.doc_id, h.chunk_index, h.source, round(h.score, 2)) for h in hits]
    [('2', 'lag', 1, None, 0.96), ('1', 'lag', 0, None, 0.8)]
    >>> tmp.cleanup()
    """

    def __init__(
        self,
        target: SearchTarget,
        encoder: BatchEncoder,
        *,
        retries: int = 3,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        load: bool = True,
        fixed_rows: bool = False,
    ) -> None:
        self.target = target
        self._fixed_rows = fixed_rows
        self.collection = collection = collection_of(target)
        self._encoder = encoder
        self._fields = fields = target.fields  # None: a rag_eval collection (its own schema)
        self._partitions = list(target.partitions)
        self._conn = Connection(target, retries=retries, call_timeout=call_timeout)
        try:
            if fields is None:
                self._coll = describe(self._conn, collection)
                self._index = target.index if target.index is not None else stored_index(self._coll)
                self._check_index()
            else:
                self._coll, self._index = foreign_collection(self._conn, collection, fields)
            loaded_now = ensure_loaded(self._conn, collection, load)
            vector, rows = (VECTOR_FIELD, "vector_id >= 0") if fields is None else (fields.vector, "")
            self._coll = probe_query_cache(self._conn, self._coll, self._index, vector_field=vector)
            if loaded_now and self._conn.kind == "server":
                settle(self._conn, collection, self._index, vector_field=vector, rows_filter=rows, coll=self._coll)
        except BaseException:
            self._conn.close()
            raise
        self._grouping: bool | None = None
        self._hybrid_rpc: bool | None = None
        self._templating: bool | None = None
        self._readers: dict[tuple[bool, str], HitReader] = {}  # by (negate, channel): each row's fields read once

    def _check_index(self) -> None:
        coll, spec = self._coll, self._index
        if coll.index_type is None:
            raise CollectionNotLoadedError(
                f"collection {coll.name!r} in Milvus at {self._conn.shown} has no "
                "index: finish ingest (finalize) first",
                collection=coll.name,
                uri=self._conn.shown,
            )
        problems = [
            ConfigProblem(
                key=f"index.{attr}",
                message=f"collection {coll.name!r} was built with {built}, not "
                f"{wanted}: use the index of the ingest manifest",
            )
            for attr, built, wanted in (
                ("metric", coll.metric, spec.metric),
                ("index_type", coll.index_type, spec.index_type),
            )
            if built is not None and str(built).upper() != wanted.upper() and wanted.upper() != "AUTOINDEX"
        ]
        if problems:
            raise ConfigError(problems)

    def close(self) -> None:
        self._conn.close()

    def features(self) -> BackendFeatures:
        """GROUPED and HYBRID as this backend and collection really perform them (probed once, cached)."""
        return BackendFeatures(grouping=self._grouping_honoured(), hybrid=self._hybrid_available())

    def check_mode(self, mode: SearchMode, *, config: str | None = None) -> None:
        """Refuse ``mode`` (exit 2, naming ``config`` when given) when this backend and collection would not
        perform it as asked (:class:`ModeSupport` decides; the backend is probed once, on first need)."""
        if mode is SearchMode.DENSE:
            return
        support = ModeSupport(
            uri=self._conn.shown, collection=self.collection, built_elsewhere=self._fields is not None,
            grouping=self._grouping_honoured() if mode is SearchMode.GROUPED else None,
            hybrid_rpc=self._hybrid_rpc_available() if mode is SearchMode.HYBRID else None,
            full_text=self._coll.full_text,
        )  # fmt: skip
        refusal = support.refusal(mode)
        if refusal is not None:
            where = f"config {config!r} uses mode {mode.value!r}, but " if config is not None else ""
            raise UnsupportedFeatureError(where + refusal, feature=mode.value, uri=self._conn.shown)

    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        """Hits for ``request.query``, best first, at most ``request.top_k`` (one call with every field, as the
        agent tool searches: what a replay times, whatever ``fixed_rows``)."""
        return self._batch([request], by_id=False)[0]

    def search_batch(self, requests: Sequence[KnowledgeSearchRequest]) -> list[tuple[KnowledgeSearchHit, ...]]:
        """One result per request, in order; many query vectors per call (requests grouped by mode,
        width, filter and group size; at most 16,384 vectors per call; ids and scores only when
        ``fixed_rows``)."""
        return self._batch(requests, by_id=self._fixed_rows)

    def _batch(
        self, requests: Sequence[KnowledgeSearchRequest], *, by_id: bool
    ) -> list[tuple[KnowledgeSearchHit, ...]]:
        groups: dict[_GroupKey, list[int]] = {}
        for i, r in enumerate(requests):
            if r.top_k > MAX_TOPK:
                raise SearchRequestError(
                    f"top_k {r.top_k:,} is over Milvus's limit of {MAX_TOPK:,}: ask for fewer hits",
                    uri=self._conn.shown,
                )
            size = r.group_size if r.mode is SearchMode.GROUPED else 1
            groups.setdefault((r.mode, r.top_k, r.category_filter, size), []).append(i)
        results: list[tuple[KnowledgeSearchHit, ...]] = [() for _ in requests]
        for key, positions in groups.items():
            for start in range(0, len(positions), MAX_NQ):
                chunk = positions[start : start + MAX_NQ]
                for pos, hits in zip(chunk, self._run(key, [requests[p].query for p in chunk], by_id), strict=True):
                    results[pos] = hits
        return results

    def _run(self, key: _GroupKey, queries: list[str], by_id: bool) -> list[tuple[KnowledgeSearchHit, ...]]:
        mode, top_k, category, group_size = key
        self.check_mode(mode)
        vectors = self._encode(queries)
        expr, params = self._filter(category)
        exact = mode is SearchMode.DENSE
        width, reach = first_widths(top_k, server=self._conn.kind == "server") if exact else (top_k, top_k)
        how = _Request(mode=mode, expr=expr, params=params, group_size=group_size, category=category, by_id=by_id)
        hits = self._pages(how, vectors, queries, width, reach)
        tied = list(range(len(queries)))
        while exact and width < MAX_TOPK:
            # the queries whose tie at the cut-off may go on: searched again, together, wider
            tied = [i for i in tied if tie_may_continue(hits[i], top_k, width)]
            if not tied:
                break
            width = reach if width < reach else min(width * 2, MAX_TOPK)
            wider = self._pages(how, [vectors[i] for i in tied], [queries[i] for i in tied], width, width)
            for i, found in zip(tied, wider, strict=True):
                hits[i] = found
        out = []
        for found in hits:
            if mode is SearchMode.GROUPED:
                self._check_grouped(found[:top_k], group_size)
            out.append(tuple(found[:top_k]))
        return out

    def _pages(
        self, how: _Request, vectors: list[list[float]], queries: list[str], limit: int, reach: int
    ) -> list[list[KnowledgeSearchHit]]:
        """One search call's pages of hits, each in the total order and category-checked: with ids and scores
        only when ``how.by_id`` (each row's fields read once: :meth:`_read_rows`), else with every field."""
        category = how.category
        if how.by_id and how.mode is SearchMode.DENSE and self._fields is None:
            reader = self._reader(how.mode)
            found = [id_page(raw) for raw in self._raw_search(how, vectors, queries, limit, reach, [])]
            pages = [p for p in found if p is not None]
            if len(pages) == len(found) and self._read_rows(reader, pages):
                return [self._checked(reader.read_known(p), category) for p in pages]
        raws = self._raw_search(how, vectors, queries, limit, reach)
        return [self._ordered(raw, how.mode, category) for raw in raws]

    def _read_rows(self, reader: HitReader, pages: Sequence[IdPage]) -> bool:
        """Give ``reader`` the fields of the rows of ``pages`` it does not keep yet (a query by id, a few
        thousand ids a call); False when a row is not found (deleted since: the search is asked again with
        every field)."""
        missing = reader.missing(pages)
        extra: dict[str, Any] = {"partition_names": self._partitions} if self._partitions else {}
        for start in range(0, len(missing), ROWS_A_QUERY):
            ids = missing[start : start + ROWS_A_QUERY]
            rows = self._conn.call(
                "query",
                self._conn.client.query,
                self.collection,
                filter=f"vector_id in [{', '.join(str(int(i)) for i in ids)}]",  # Milvus's own int64 ids
                output_fields=list(OUTPUT_FIELDS),
                collection=self.collection,
                **extra,
            )
            reader.remember(rows)
        return not missing or not reader.missing(pages)

    def _raw_search(
        self, how: _Request, vectors: list[list[float]], queries: list[str], limit: int, reach: int,
        output: list[str] | None = None,
    ) -> Any:
        """One search call of ``limit`` hits a query; the index's search parameters are those of a search of
        ``reach`` hits (HNSW's ``ef``), so that a page of ``limit`` is a prefix of the page of ``reach``.
        ``output``: the fields each hit carries (None: every field of the hits)."""
        mode, expr, params, group_size = how.mode, how.expr, how.params, how.group_size
        if mode is SearchMode.HYBRID:
            return self._hybrid_search(vectors, queries, limit, expr, params)
        extra: dict[str, Any] = {"filter_params": params} if params else {}
        if self._partitions:
            extra["partition_names"] = self._partitions
        if mode is SearchMode.GROUPED:
            extra.update(group_by_field=self._doc_field(), group_size=group_size, strict_group_size=False)
        f = self._fields
        return self._conn.call(
            "search",
            self._conn.client.search,
            self.collection,
            data=vectors,
            anns_field=VECTOR_FIELD if f is None else f.vector,
            limit=limit,
            filter=expr,
            output_fields=output if output is not None else list(OUTPUT_FIELDS) if f is None else f.output_fields(),
            collection=self.collection,
            search_params=search_params(self._coll, self._index, reach * group_size),
            **extra,
        )

    def _doc_field(self) -> str:
        """The field grouping groups by: ``doc_id``, or a foreign collection's scalar doc id field."""
        ref = self._fields.doc_id if self._fields is not None else None
        if self._fields is None:
            return "doc_id"
        if ref is None or ref.path or ref.dynamic:
            raise UnsupportedFeatureError(
                f"collection {self.collection!r} has no scalar doc id field to group by (fields.doc_id is "
                f"{ref.spec if ref else 'not mapped'}): use mode 'dense'",
                feature="grouping",
                uri=self._conn.shown,
            )
        return ref.field

    def _ordered(self, raw: Any, mode: SearchMode, category: str | None) -> list[KnowledgeSearchHit]:
        """One query's hits in the documented total order (score, then vector id), category-checked."""
        f = self._fields
        if f is None:
            return self._checked(self._reader(mode).read(raw), category)
        metric = self._coll.metric or self._index.metric
        negate = mode is not SearchMode.HYBRID and metric.upper() == "L2"  # higher is better everywhere
        return self._checked(in_total_order([foreign_hit(h, negate, f) for h in raw]), category)

    def _reader(self, mode: SearchMode) -> HitReader:
        """The hit reader of ``mode``'s searches (one per score channel: each row's fields read once)."""
        metric = self._coll.metric or self._index.metric
        channel = "rrf" if mode is SearchMode.HYBRID else "dense"
        negate = channel == "dense" and metric.upper() == "L2"  # higher is better everywhere
        reader = self._readers.get((negate, channel))
        if reader is None:
            reader = self._readers[(negate, channel)] = HitReader(negate=negate, channel=channel)
        return reader

    def _checked(self, hits: list[KnowledgeSearchHit], category: str | None) -> list[KnowledgeSearchHit]:
        if category is not None:
            self._check_category(hits, category)
        return hits

    def _encode(self, queries: list[str]) -> list[list[float]]:
        encoded = self._encoder(queries)
        vectors = [as_list(v) for v in encoded]
        if len(vectors) != len(queries):
            raise DimensionMismatchError(
                f"the encoder returned {len(vectors)} vectors for {len(queries)} queries: fix the encoder",
                uri=self._conn.shown,
            )
        for v in vectors:
            if len(v) != self._coll.dim:
                raise DimensionMismatchError(
                    f"query vectors have dimension {len(v)} but collection {self.collection!r} holds "
                    f"{self._coll.dim}-d vectors: embed queries with the model used at ingest",
                    uri=self._conn.shown,
                )
        return vectors

    def _filter(self, category: str | None) -> tuple[str, dict[str, str] | None]:
        if category is None:
            return "", None
        field = "category"
        if self._fields is not None:
            if self._fields.category is None:
                raise SearchRequestError(
                    f"a config filters by category but collection {self.collection!r} maps no category field: "
                    "map fields.category, or drop rag.category-filter",
                    uri=self._conn.shown,
                )
            field = self._fields.category.expr
        never = f' and {field} != ""' if category == MISSING_STR else ""  # "" stores a missing category
        if self._templating is None:
            self._templating = probe_templating(self._conn, self._coll, field_expr=field)
        if self._templating:
            return f"{field} == {{category}}" + never, {"category": category}
        return f"{field} == {milvus_string_literal(category)}{never}", None

    def _check_category(self, hits: list[KnowledgeSearchHit], category: str | None) -> None:
        stray = [h.vector_id for h in hits if category is not None and h.category != category]
        if stray:
            raise FilterError(
                f"Milvus at {self._conn.shown} returned rows {stray[:5]} outside the category filter "
                f"{quoted(category)}: report this backend as unsafe for filtering",
                uri=self._conn.shown,
            )

    def _check_grouped(self, hits: list[KnowledgeSearchHit], group_size: int) -> None:
        per_doc = Counter(h.doc_id for h in hits)
        if per_doc and max(per_doc.values()) > group_size:
            self._grouping = False
            self.check_mode(SearchMode.GROUPED)  # refused now: the backend was seen ignoring the grouping

    def _hybrid_search(
        self, vectors: list[list[float]], queries: list[str], top_k: int, expr: str, params: dict[str, str] | None
    ) -> Any:
        pm = pymilvus()
        dense = pm.AnnSearchRequest(
            data=vectors,
            anns_field=VECTOR_FIELD,
            limit=top_k,
            expr=expr or None,
            expr_params=params,
            param=search_params(self._coll, self._index, top_k),
        )
        sparse = pm.AnnSearchRequest(
            data=queries,
            anns_field=SPARSE_FIELD,
            param={"metric_type": "BM25"},
            limit=top_k,
            expr=expr or None,
            expr_params=params,
        )
        return self._conn.call(
            "hybrid search",
            self._conn.client.hybrid_search,
            self.collection,
            [dense, sparse],
            pm.RRFRanker(60),
            limit=top_k,
            output_fields=list(OUTPUT_FIELDS),
            collection=self.collection,
        )

    def _grouping_honoured(self) -> bool:
        if self._grouping is None:
            vector = VECTOR_FIELD if self._fields is None else self._fields.vector
            self._grouping = probe_grouping(
                self._conn, self._coll, self._index, doc_field=self._doc_field(), vector_field=vector
            )
        return self._grouping

    def _hybrid_available(self) -> bool:
        return self._fields is None and self._hybrid_rpc_available() and self._coll.full_text

    def _hybrid_rpc_available(self) -> bool:
        if self._fields is not None:  # a collection built elsewhere: not probed (no BM25 field of ours)
            return False
        if self._hybrid_rpc is None:
            self._hybrid_rpc = probe_hybrid(self._conn, self._coll, self._index)
        return self._hybrid_rpc



def as_list(vector: Sequence[float]) -> list[float]:
    if type(vector) is list:
        return vector  # already what pymilvus sends
    tolist = getattr(vector, "tolist", None)
    return list(tolist()) if callable(tolist) else [float(x) for x in vector]


def first_widths(top_k: int, *, server: bool = False) -> tuple[int, int]:
    """A DENSE search's first page, and its reach. On Milvus Lite the page is two hits more than wanted:
    when hit ``top_k`` does not tie with the last of the page, the cut-off is placed by the total order, and
    only when it does is the query searched again, at the reach (two and a sixteenth more than wanted, then
    doubling: :func:`tie_may_continue`). Two, not one: re-ingested copies share a vector, so they tie in
    pairs; on the shipped knowledge base one more hit left 41 of 264 queries tied at the cut-off (a second
    search each), two more leave 1. On a server (``server``) the first page is the reach itself: a search
    call costs more there than the hits it would save (5,000 log queries in batches of 64 made 110 calls
    with a page of 22 for 20, 79 with 23, one a batch, and searched in 10-23% less time). The first page is
    searched with the index parameters of the reach, so that it is a prefix of the page of the reach on any
    index (HNSW's ``ef`` is the same).

    >>> first_widths(20), first_widths(100), first_widths(1), first_widths(MAX_TOPK)
    ((22, 23), (102, 108), (3, 3), (16384, 16384))
    >>> first_widths(20, server=True), first_widths(100, server=True)
    ((23, 23), (108, 108))
    """
    reach = min(top_k + 2 + top_k // 16, MAX_TOPK)
    return (reach if server else min(top_k + 2, reach)), reach


def tie_may_continue(hits: Sequence[KnowledgeSearchHit], top_k: int, width: int) -> bool:
    """True when the hits tied with the ``top_k``-th run to the end of a full page of ``width``:
    rows with that score may lie beyond it, so the cut-off cannot be placed by the total order yet."""
    if len(hits) < width or len(hits) <= top_k:
        return False
    return hit_order(hits[top_k - 1])[:2] == hit_order(hits[-1])[:2]  # the same score (NaN: the same too)
