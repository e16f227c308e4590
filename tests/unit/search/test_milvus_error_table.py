"""The Milvus error table: every row gives its project error, with its message, from the errors Milvus raises.

The pure rows are fed pymilvus ``MilvusException`` objects built here (the code and message Milvus uses);
the Lite rows come from a real Milvus Lite file. The 2.3 server's own errors are in
tests/integration/test_milvus_errors.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pymilvus import MilvusClient, MilvusException

from rag_eval.core.errors import (
    CollectionNotFoundError,
    CollectionNotLoadedError,
    DimensionMismatchError,
    FilterError,
    InfrastructureError,
    InputError,
    SearchBackendError,
    SearchRequestError,
    SearchUnavailableError,
    UnsupportedFeatureError,
)
from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusStore, errors
from rag_eval.search.milvus.errors import Row
from tests.milvus_target import target

URI = "http://db.example:19530"


def _translate(code: int, message: str, *, what: str = "search", budget: float | None = None) -> Any:
    return errors.translate(MilvusException(code=code, message=message), what, uri=URI, collection="kb", budget=budget)


# (code, message as Milvus words it, the row, the project's error, its whole message)
PURE = [
    (2, "Fail connecting to server on 127.0.0.1:9, illegal connection params or server unavailable",
     errors.UNAVAILABLE, SearchUnavailableError,
     f"Milvus at {URI} is not reachable (search): start the server or check --milvus-uri"),
    (65535, "[search] Retry timeout: 1e-06s, message=proxy TaskCondition context Done",
     errors.UNAVAILABLE, SearchUnavailableError,
     f"Milvus at {URI} is not reachable (search): start the server or check --milvus-uri"),
    (1, "[flush] Retry run out of 3 retries", errors.UNAVAILABLE, SearchUnavailableError,
     f"Milvus at {URI} is not reachable (search): start the server or check --milvus-uri"),
    (100, "collection not found[database=default][collection=kb]", errors.NOT_FOUND, CollectionNotFoundError,
     f"collection 'kb' does not exist in Milvus at {URI}: ingest the data set first or check the collection name"),
    (1, "collection 'kb' does not exist", errors.NOT_FOUND, CollectionNotFoundError,
     f"collection 'kb' does not exist in Milvus at {URI}: ingest the data set first or check the collection name"),
    (65535, "can't find collection kb", errors.NOT_FOUND, CollectionNotFoundError,
     f"collection 'kb' does not exist in Milvus at {URI}: ingest the data set first or check the collection name"),
    (101, "failed to search: collection not loaded[collection=4708]", errors.NOT_LOADED, CollectionNotLoadedError,
     f"collection 'kb' in Milvus at {URI} is not loaded: load it (rag_eval loads on open unless told not to) "
     "or re-run ingest"),
    (1, "Collection 'kb' is in state 'released'; call load() before search/get/query", errors.NOT_LOADED,
     CollectionNotLoadedError,
     f"collection 'kb' in Milvus at {URI} is not loaded: load it (rag_eval loads on open unless told not to) "
     "or re-run ingest"),
    (700, "index not found[collection=kb]", errors.NO_INDEX, CollectionNotLoadedError,
     f"collection 'kb' in Milvus at {URI} has no index: finish ingest (finalize) first"),
    (65535, "failed to create query plan: cannot parse expression: category === 'x'", errors.BAD_FILTER, FilterError,
     f"Milvus at {URI} refused the filter (failed to create query plan: cannot parse expression: category === 'x'): "
     "fix the filter value"),
    (6, "unexpected character '=' at column 12", errors.BAD_FILTER, FilterError,
     f"Milvus at {URI} refused the filter (unexpected character '=' at column 12): fix the filter value"),
    (65535, "the length(2) of float data should divide the dim(4)", errors.WRONG_DIMENSION, DimensionMismatchError,
     "vector dimension does not match collection 'kb' (the length(2) of float data should divide the dim(4)): "
     "embed with the model used at ingest"),
    (6, "vector field 'vector' expected dim 4, got 2", errors.WRONG_DIMENSION, DimensionMismatchError,
     "vector dimension does not match collection 'kb' (vector field 'vector' expected dim 4, got 2): embed with the "
     "model used at ingest"),
    (65535, "sizeof(float) * dim * nq does not match the placeholder", errors.WRONG_DIMENSION, DimensionMismatchError,
     "vector dimension does not match collection 'kb' (sizeof(float) * dim * nq does not match the placeholder): "
     "embed with the model used at ingest"),
    (1100, "invalid parameter[expected=...]", errors.REFUSED, SearchRequestError,
     f"Milvus at {URI} refused search on 'kb': invalid parameter[expected=...]"),
    (65535, "topk [100000] is invalid, top k should be in range [1, 16384]", errors.REFUSED, SearchRequestError,
     f"Milvus at {URI} refused search on 'kb': topk [100000] is invalid, top k should be in range [1, 16384]"),
    (65535, "channel not available", errors.BACKEND_FAILED, SearchBackendError,
     f"Milvus at {URI} failed search on 'kb': channel not available: check the server's health and logs"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "message", "row", "error", "text"), PURE, ids=[p[1][:40] for p in PURE])
def test_each_row_gives_its_error_and_message(
    code: int, message: str, row: Row, error: type[Exception], text: str
) -> None:
    assert errors.milvus_row(code, message) is row
    translated = _translate(code, message)
    assert type(translated) is error and row.error is error
    assert str(translated) == text and translated.uri == URI


def test_every_row_of_the_table_is_reached() -> None:
    assert {id(p[2]) for p in PURE} == {id(r) for r in (*errors.MILVUS_ROWS, errors.BACKEND_FAILED)}


@pytest.mark.parametrize("row", errors.MILVUS_ROWS, ids=lambda r: r.error.__name__)
def test_every_signal_of_a_row_leads_to_that_row_and_no_earlier_one(row: Row) -> None:
    for signal in row.when:
        message = " ".join(signal.words) or "no words"
        assert errors.milvus_row(signal.code if signal.code is not None else 65535, message) is row, signal


def test_the_first_matching_row_wins_and_words_are_read_in_any_case() -> None:
    assert errors.milvus_row(65535, "Collection Not Loaded: invalid state") is errors.NOT_LOADED
    assert errors.milvus_row(101, "collection not found") is errors.NOT_FOUND  # a message of row 2, code of row 3
    assert errors.milvus_row(6, "unexpected character") is errors.BACKEND_FAILED  # code 6 alone is no filter
    assert errors.milvus_row(65535, "dimension") is errors.BACKEND_FAILED  # "dim" needs a second word


def test_the_timeout_that_ran_out_is_said() -> None:
    late = _translate(2, "Fail connecting to server", what="connect", budget=2.5)
    assert str(late) == f"Milvus at {URI} did not answer within 2.5 s (connect): start the server or check --milvus-uri"


def test_structured_attributes_and_exit_codes() -> None:
    missing = _translate(100, "collection not found")
    assert isinstance(missing, InfrastructureError) and missing.exit_code == 3 and missing.collection == "kb"
    nameless = errors.translate(MilvusException(code=101, message="not loaded"), "search", uri=URI)
    assert isinstance(nameless, CollectionNotLoadedError) and nameless.collection == "?" and "'?'" in str(nameless)
    refused = _translate(1100, "invalid")
    assert isinstance(refused, InputError) and refused.exit_code == 2
    assert _translate(65535, "channel not available").exit_code == 3
    one = _translate(65535, "line one\n  line two\tand three")
    assert "\n" not in str(one) and "line one line two and three" in str(one)


@pytest.mark.parametrize(
    ("status", "row"),
    [
        ("UNIMPLEMENTED", errors.UNIMPLEMENTED),
        ("UNAVAILABLE", errors.UNAVAILABLE),
        ("DEADLINE_EXCEEDED", errors.UNAVAILABLE),
        (None, errors.UNAVAILABLE),
        ("RESOURCE_EXHAUSTED", errors.GRPC_OTHER),
        ("INTERNAL", errors.GRPC_OTHER),
    ],
)
def test_grpc_status_codes(status: str | None, row: Row) -> None:
    assert errors.grpc_row(status) is row


def test_grpc_messages() -> None:
    unsupported = errors.UNIMPLEMENTED.build(errors.Failure(uri=URI, what="hybrid search"))
    assert isinstance(unsupported, UnsupportedFeatureError) and unsupported.feature == "hybrid search"
    assert str(unsupported) == (
        f"Milvus at {URI} does not implement hybrid search: use a backend that offers it (Milvus Lite, or a "
        "server >= 2.5) or another search mode"
    )
    other = errors.GRPC_OTHER.build(errors.Failure(uri=URI, what="insert", status="RESOURCE_EXHAUSTED"))
    assert str(other) == f"Milvus at {URI} failed insert (RESOURCE_EXHAUSTED): check the server's health and logs"


def test_other_exceptions_are_not_milvus_errors() -> None:
    assert errors.row_for(ValueError("x")) is None
    assert errors.translate(KeyError("x"), "search", uri=URI) is None


# -- the errors a real Milvus Lite raises --------------------------------------------------------------------------

DIM = 4


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A raw pymilvus client on a Lite file with one filled collection ``kb`` (4-d, FLAT, COSINE)."""
    uri = str(tmp_path_factory.mktemp("error-table") / "milvus.db")
    rows = [ChunkRow(vector_id=i, doc_id=f"d{i}", chunk_index=0, content="c", title="t", source="s", category="k",
                     start=0, end=1, vector=[1.0, float(i), 0.0, 1.0]) for i in range(50)]  # fmt: skip
    with MilvusStore(target(uri, "kb")) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        store.insert(rows)
        store.finalize()
        yield store._conn.client


def _released(client: Any) -> None:
    client.release_collection("kb")
    try:
        client.search("kb", data=[[1.0] * DIM], limit=1)
    finally:
        client.load_collection("kb")


_ROW = {"vector_id": 99, "doc_id": "", "chunk_index": -1, "content": "", "title": "", "source": "", "category": "",
        "char_start": -1, "char_end": -1}  # fmt: skip

LITE: list[tuple[str, Callable[[Any], object], Row, type[Exception]]] = [
    ("missing collection", lambda c: c.describe_collection("nope"), errors.NOT_FOUND, CollectionNotFoundError),
    ("search a missing collection", lambda c: c.search("nope", data=[[1.0] * DIM], limit=1), errors.NOT_FOUND,
     CollectionNotFoundError),
    ("released collection", _released, errors.NOT_LOADED, CollectionNotLoadedError),
    ("bad filter syntax", lambda c: c.search("kb", data=[[1.0] * DIM], limit=1, filter="category === 'x'"),
     errors.BAD_FILTER, FilterError),
    ("filter on an unknown field", lambda c: c.query("kb", filter="nocolumn == 1", limit=1), errors.BAD_FILTER,
     FilterError),
    ("filter templating", lambda c: c.query("kb", filter="category == {c}", filter_params={"c": "x"}, limit=1),
     errors.BAD_FILTER, FilterError),
    ("insert of another dimension", lambda c: c.insert("kb", [{**_ROW, "vector": [1.0, 2.0]}]),
     errors.WRONG_DIMENSION, DimensionMismatchError),
    ("search with another dimension", lambda c: c.search("kb", data=[[1.0] * (DIM - 1)], limit=1),
     errors.WRONG_DIMENSION, DimensionMismatchError),
    ("limit 0", lambda c: c.search("kb", data=[[1.0] * DIM], limit=0), errors.REFUSED, SearchRequestError),
    ("unknown metric", lambda c: c.search("kb", data=[[1.0] * DIM], limit=1, search_params={"metric_type": "XX"}),
     errors.REFUSED, SearchRequestError),
    ("flush out of time", lambda c: c.flush("kb", timeout=1e-6), errors.UNAVAILABLE, SearchUnavailableError),
    ("query past its gRPC deadline",  # a deadline already past; now and then the local call still beats it
     lambda c: _tries(lambda: c.query("kb", filter="vector_id >= 0", limit=50, timeout=1e-9)),
     errors.UNAVAILABLE, SearchUnavailableError),
]  # fmt: skip


def _tries(call: Callable[[], object], times: int = 5) -> None:
    """``call`` up to ``times`` times: what it raises first, or nothing when it never raised."""
    for _ in range(times):
        call()


@pytest.mark.milvus_lite
@pytest.mark.parametrize(("case", "call", "row", "error"), LITE, ids=[c[0] for c in LITE])
def test_lite_errors_fall_under_their_rows(
    lite: Any, case: str, call: Callable[[Any], object], row: Row, error: type[Exception]
) -> None:
    with pytest.raises(Exception) as raised:
        call(lite)
    assert errors.row_for(raised.value) is row
    translated = errors.translate(raised.value, case, uri="lite.db", collection="kb")
    assert type(translated) is error and translated.uri == "lite.db"


def test_connection_errors_fall_under_their_rows() -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = int(sock.getsockname()[1])
    with pytest.raises(MilvusException) as refused:
        MilvusClient(uri=f"http://127.0.0.1:{closed}", timeout=1)
    assert errors.row_for(refused.value) is errors.UNAVAILABLE
    with pytest.raises(MilvusException) as bad:
        MilvusClient(uri="foo://bar:1", timeout=1)
    assert errors.row_for(bad.value) is errors.BAD_URI
    opened = errors.translate(bad.value, "connect", uri="foo://bar:1")
    assert isinstance(opened, SearchUnavailableError) and str(opened).startswith("cannot open Milvus at foo://bar:1: ")
    assert str(opened).endswith(": check --milvus-uri")
