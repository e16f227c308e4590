"""The hit reader keeps each row's fields between pages and orders a best-first page by its runs of equal
scores: the hits are those of the former conversion (every hit read, the page sorted whole by the total order),
ties, NaN scores, missing values, a row twice in a page and a row whose fields changed included."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.core.types import KnowledgeSearchHit, hit_order
from rag_eval.search.milvus.hits import HitReader, id_page, in_total_order, to_hit
from rag_eval.search.milvus.schema import MISSING_INT, MISSING_STR


def _former(raws: list[dict[str, Any]], negate: bool, channel: str) -> list[KnowledgeSearchHit]:
    """The conversion before the reader: every hit read, the page sorted whole."""
    return sorted([to_hit(h, negate, channel) for h in raws], key=hit_order)


def _same(a: list[KnowledgeSearchHit], b: list[KnowledgeSearchHit]) -> bool:
    """Equal hit by hit, NaN scores equal to NaN (a dataclass compares its fields as a tuple does: NaN is
    equal only to itself, the same object)."""
    def fields(h: KnowledgeSearchHit) -> tuple[Any, ...]:
        score = "nan" if math.isnan(h.score) else h.score
        scores = {k: "nan" if math.isnan(v) else v for k, v in h.scores.items()}
        return (h.id, h.content, score, scores, dict(h.metadata), h.doc_id, h.chunk_index, h.vector_id, h.source,
                h.title, h.category)  # fmt: skip
    return [fields(h) for h in a] == [fields(h) for h in b]


SCORES = st.one_of(
    st.sampled_from([0.9, 0.5, 0.5, 0.25, 0.0, -0.0, 1.0]),
    st.floats(min_value=-1, max_value=1),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)
ROW = st.fixed_dictionaries(
    {
        "vector_id": st.one_of(st.integers(min_value=0, max_value=12), st.none()),
        "doc_id": st.sampled_from(["lag", "disk", MISSING_STR]),
        "chunk_index": st.sampled_from([0, 1, 2, MISSING_INT]),
        "content": st.sampled_from(["Check the SQL thread.", "Free some disk.", ""]),
        "title": st.sampled_from(["Replica lag", MISSING_STR]),
        "source": st.sampled_from(["kb/lag.md", MISSING_STR]),
        "category": st.sampled_from(["db", MISSING_STR]),
        "char_start": st.sampled_from([0, 40, MISSING_INT]),
        "char_end": st.sampled_from([39, 80, MISSING_INT]),
    }
)
PAGE = st.lists(st.tuples(SCORES, ROW), max_size=12)


class _Hit(dict[str, Any]):
    """A pymilvus hit: a dict, its primary key also an attribute."""

    @property
    def pk(self) -> Any:
        return self["id"]


def _raw(score: float, row: dict[str, Any], pk: int) -> dict[str, Any]:
    return _Hit(id=pk, distance=score, entity=dict(row))


@settings(max_examples=300, deadline=None)
@given(pages=st.lists(PAGE, min_size=1, max_size=4), negate=st.booleans(), best_first=st.booleans())
def test_the_reader_gives_the_hits_of_the_former_conversion(
    pages: list[list[tuple[float, dict[str, Any]]]], negate: bool, best_first: bool
) -> None:
    reader = HitReader(negate=negate, channel="dense")
    for page in pages:  # the same reader over several pages: a row seen before, its fields changed or not
        if best_first:  # as Milvus answers: best first, ties in any order
            page = sorted(page, key=lambda p: -p[0] if not math.isnan(p[0]) else math.inf)
        raws = [_raw(score, row, pk) for pk, (score, row) in enumerate(page)]
        assert _same(reader.read(raws), _former(raws, negate, "dense"))


class _IdPage(list[Any]):
    """A pymilvus page of hits without fields: its primary keys and distances also as columns."""

    ids: list[Any]
    distances: list[float]


@settings(max_examples=300, deadline=None)
@given(pages=st.lists(PAGE, min_size=1, max_size=4), negate=st.booleans(), columns=st.booleans())
def test_pages_of_ids_read_with_the_rows_kept_give_the_hits_of_the_former_conversion(
    pages: list[list[tuple[float, dict[str, Any]]]], negate: bool, columns: bool
) -> None:
    """Ids and scores only, each row's fields read once by id: the hits of the same pages with every field."""
    table: dict[int, dict[str, Any]] = {}  # a collection: one set of fields per vector id (its primary key)
    for page in pages:
        for _, row in page:
            if row["vector_id"] is not None:
                table.setdefault(row["vector_id"], row)
    reader = HitReader(negate=negate, channel="dense")
    for page in pages:
        rows = [table[row["vector_id"]] for _, row in page if row["vector_id"] is not None]
        scores = [score for score, row in page if row["vector_id"] is not None]
        full = [_raw(score, row, row["vector_id"]) for score, row in zip(scores, rows, strict=True)]
        bare = [_Hit(id=row["vector_id"], distance=score, entity={}) for score, row in zip(scores, rows, strict=True)]
        if columns:
            bare = _IdPage(bare)
            bare.ids, bare.distances = [row["vector_id"] for row in rows], scores
        found = id_page(bare)
        assert found is not None
        missing = reader.missing([found])
        assert len(missing) == len(set(missing)) and set(missing) <= set(found[0])
        reader.remember([table[k] for k in missing])
        assert reader.missing([found]) == []
        assert _same(reader.read_known(found), _former(full, negate, "dense"))


def test_ties_missing_values_a_row_twice_and_a_changed_row() -> None:
    row = {"vector_id": 10, "doc_id": "lag", "chunk_index": 0, "content": "Check the SQL thread.", "title": "",
           "source": "kb/lag.md", "category": "db", "char_start": 0, "char_end": 21}  # fmt: skip
    page = [
        _raw(0.9, {**row, "vector_id": 3}, 1),
        _raw(0.5, row, 2),
        _raw(0.5, {**row, "vector_id": 9, "doc_id": MISSING_STR, "chunk_index": MISSING_INT}, 3),
        _raw(0.5, row, 4),  # the same row twice
        _raw(0.5, {**row, "vector_id": None}, 100),  # no vector id: named by its primary key
        _raw(0.25, {**row, "vector_id": 2}, 5),
    ]
    reader = HitReader(negate=False, channel="dense")
    hits = reader.read(page)
    assert [h.id for h in hits] == ["3", "9", "10", "10", "100", "2"]
    assert hits[1].doc_id is None and hits[1].chunk_index is None
    assert _same(hits, _former(page, False, "dense"))
    changed = [_raw(0.7, {**row, "content": "Restart the replica."}, 2)]  # the same vector id, new fields
    assert reader.read(changed)[0].content == "Restart the replica."
    assert _same(reader.read(changed), _former(changed, False, "dense"))


def test_a_page_that_is_not_best_first_is_sorted_whole() -> None:
    hits = [KnowledgeSearchHit(id=str(i), content="", score=s, vector_id=str(i)) for i, s in
            enumerate([0.1, 0.9, math.nan, 0.9, -math.inf])]  # fmt: skip
    assert [h.id for h in in_total_order(hits)] == ["1", "3", "0", "4", "2"]
