"""The flow end to end through the port, and the unchanged agent tool."""

from __future__ import annotations

import inspect

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import LookupKnowledge
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import SearchMode
from rag_eval.search.memory import InMemoryRow, InMemorySearch

ROWS = [
    InMemoryRow(
        vector_id="1", content="lag a", vector=(1.0, 0.0, 0.0), doc_id="lag", chunk_index=0, category="replication"
    ),
    InMemoryRow(
        vector_id="2", content="lag b", vector=(0.9, 0.1, 0.0), doc_id="lag", chunk_index=1, category="replication"
    ),
    InMemoryRow(
        vector_id="3", content="lag c", vector=(0.8, 0.2, 0.0), doc_id="lag", chunk_index=2, category="replication"
    ),
    InMemoryRow(
        vector_id="4", content="lock", vector=(0.0, 1.0, 0.0), doc_id="locks", chunk_index=0, category="locking"
    ),
]


def encoder(text: str) -> tuple[float, float, float]:
    return (1.0, 0.05, 0.0)


def test_lookup_knowledge_keeps_its_one_argument_input() -> None:
    params = list(inspect.signature(LookupKnowledge.lookup_knowledge).parameters)
    assert params == ["self", "query"]


def test_flow_asks_the_port_for_retrieve_k_with_the_normalised_query_and_filter() -> None:
    port = InMemorySearch.from_rows(ROWS, encoder)
    config = RagConfig.from_properties_text("rag.retrieve-k=3\nrag.return-n=2\nrag.category-filter=replication")
    payload = LookupKnowledge(port, config).lookup_knowledge("  replica   lag  ")
    (request,) = port.requests
    assert (request.query, request.top_k, request.category_filter, request.mode) == (
        "replica lag",
        3,
        "replication",
        SearchMode.DENSE,
    )
    assert payload.document_ids == ("lag#chunk-0", "lag#chunk-1")
    assert payload.query == "  replica   lag  "


def test_run_records_every_stage_and_timings() -> None:
    port = InMemorySearch.from_rows(ROWS, encoder)
    record = LookupKnowledge(port, RagConfig()).run("replica lag")
    assert len(record.hits) == 4 and len(record.candidates) == 4
    assert [e.stage.value for e in record.outcome.trace] == ["returned", "returned", "cap", "returned"]
    assert record.timings.search_ns > 0 and record.timings.postprocess_ns > 0
    assert record.timings.total_ns >= record.timings.search_ns


def test_shared_hits_are_cut_to_each_configs_retrieve_k() -> None:
    port = InMemorySearch.from_rows(ROWS, encoder)
    wide = LookupKnowledge(port, RagConfig()).run("q")
    from rag_eval.core.lookup import Pipeline

    narrow = Pipeline(RagConfig.from_properties_text("rag.retrieve-k=2\nrag.return-n=2")).process(wide.hints, wide.hits)
    assert [h.vector_id for h in narrow.hits] == ["1", "2"]
    # the shared search and transform are not this lookup's: timed nowhere unless the caller says
    assert (narrow.timings.search_ns, narrow.timings.transform_ns) == (0, 0) and narrow.timings.postprocess_ns > 0
    timed = Pipeline(RagConfig()).process(wide.hints, wide.hits, search_ns=7, transform_ns=3)
    assert (timed.timings.search_ns, timed.timings.transform_ns) == (7, 3)


def test_transformer_hints() -> None:
    hints = KnowledgeQueryTransformer().transform("Deadlock found ER_LOCK_DEADLOCK innodb_lock_wait_timeout on db-12")
    assert hints.identifiers == ("ER_LOCK_DEADLOCK", "innodb_lock_wait_timeout", "db-12")
    assert "found" in hints.keywords and "on" not in hints.keywords
