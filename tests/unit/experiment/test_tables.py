"""One reader per table of an experiment file, each on its own: the fields it returns, its defaults, and
the problems only the file shows (each ``message @ table.key``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_eval.core.errors import ConfigProblem
from rag_eval.experiment.latency import LatencyMode, TimingPlan
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.experiment.model import DEFAULT_CUTOFFS, PROFILES, CollectionSpec, IngestProfile
from rag_eval.experiment.section import TableReader
from rag_eval.experiment.tables import (
    SHAPES,
    TABLES,
    read_collection,
    read_dataset,
    read_experiment,
    read_gates,
    read_ingest,
    read_load,
    read_metrics,
    read_milvus,
    read_timing,
    read_traffic,
)
from rag_eval.search.milvus.schema import IndexSpec


def read(reader: Any, table: dict[str, Any], prefix: str, *, present: bool = True, base: Path = Path("/exp")
         ) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    problems: list[ConfigProblem] = []
    t = TableReader(table, prefix, problems, base=base, present=present)
    fields = reader(t)
    t.finish()
    return fields, [str(p) for p in problems]


def test_the_tables_in_the_order_their_problems_are_reported() -> None:
    assert list(TABLES) == ["experiment", "dataset", "chunker", "embedder", "milvus", "collection", "ingest",
                            "metrics", "timing", "report", "gates", "load", "traffic", "service"]  # fmt: skip
    assert set(SHAPES) == {"gates", "load", "collection", "traffic"}


def test_experiment_and_dataset() -> None:
    assert read(read_experiment, {}, "experiment") == (
        {"name": "experiment", "baseline": "", "production_cap": None, "payload_budget": True}, [],
    )  # fmt: skip
    written = {"name": "n", "baseline": "b", "production_cap": 2, "payload_budget": False}
    assert read(read_experiment, written, "experiment")[0] == written
    fields, problems = read(read_dataset, {"path": "data", "split": "dev"}, "dataset", base=Path("/exp"))
    assert fields == {"dataset_path": Path("/exp/data"), "split": "dev", "min_overlap_chars": 1} and problems == []
    fields, problems = read(read_dataset, {"min_overlap_chars": "1"}, "dataset", base=Path("/exp"))
    assert fields["dataset_path"] == Path("/exp")
    assert problems == ["required @ dataset.path", "expected int, got '1' @ dataset.min_overlap_chars"]


def test_milvus_a_lite_file_beside_the_experiment_a_server_as_written_and_the_index() -> None:
    fields, problems = read(read_milvus, {"uri": "db/kb.db", "timeout": 5, "index": {"type": "flat", "metric": "ip"}},
                            "milvus", base=Path("/exp"))  # fmt: skip
    assert problems == []
    assert (fields["milvus_uri"], fields["timeout"], fields["collection"], fields["token_env"]) == (
        "/exp/db/kb.db", 5.0, None, "RAG_EVAL_MILVUS_TOKEN",
    )  # fmt: skip
    assert (fields["index"].index_type, fields["index"].metric) == ("FLAT", "IP")
    server, _ = read(read_milvus, {"uri": "http://h:19530"}, "milvus")
    assert server["milvus_uri"] == "http://h:19530" and server["index"] == IndexSpec()
    _, problems = read(read_milvus, {"timeout": True, "index": {"kind": "x"}}, "milvus")
    assert problems == ["expected a number, got True @ milvus.timeout", "unknown key @ milvus.index.kind"]


def test_collection_absent_or_read_with_its_problems() -> None:
    assert read(read_collection, {}, "collection", present=False) == ({"existing": None}, [])
    fields, problems = read(read_collection, {"name": "kb", "fields": {"id": "pk"}, "partitions": ["p"], "load": True,
                                              "max_unresolved": 0, "fuzzy_threshold": 90}, "collection")  # fmt: skip
    assert problems == []
    assert fields["existing"] == CollectionSpec(name="kb", fields={"id": "pk"}, load=True, partitions=("p",),
                                                max_unresolved=0.0, fuzzy_threshold=90.0)  # fmt: skip
    fields, problems = read(read_collection, {"name": " ", "fields": {"id": 1, "text": "t"}, "partitions": ["", 2]},
                            "collection")  # fmt: skip
    assert problems == [
        "required: the collection to replay @ collection.name",
        "expected a field name (text), got 1 @ collection.fields.id",
        "expected partition names, got ['', 2] @ collection.partitions",
    ]
    assert fields["existing"].fields == {"text": "t"} and fields["existing"].partitions == ()


def test_ingest_a_profile_and_shares_on_top_of_it() -> None:
    # no profile named: production, for the reader to let the data set choose (default_profile)
    assert read(read_ingest, {}, "ingest")[0] == {"profile": PROFILES["production"], "profile_named": False}
    assert read(read_ingest, {"profile": "production"}, "ingest")[0]["profile_named"] is True
    fields, problems = read(read_ingest, {"profile": "production", "duplicate_share": 0, "seed": 3}, "ingest")
    assert problems == []
    assert fields["profile"] == IngestProfile(name="production+custom", legacy_share=0.10, missing_doc_share=0.05,
                                              duplicate_share=0.0, seed=3)  # fmt: skip
    fields, problems = read(read_ingest, {"profile": "noisy"}, "ingest")
    assert fields["profile"] == PROFILES["clean"]
    assert problems == [f"unknown profile 'noisy' (known: {', '.join(PROFILES)}) @ ingest.profile"]


def test_metrics_cutoffs_sorted_duplicates_kept_for_the_check() -> None:
    assert read(read_metrics, {}, "metrics") == ({"cutoffs": DEFAULT_CUTOFFS, "lead_cutoffs": ()}, [])
    assert read(read_metrics, {"cutoffs": [10, 1, 5, 5], "lead": 10}, "metrics") == (
        {"cutoffs": (1, 5, 5, 10), "lead_cutoffs": (10,)}, [],
    )  # fmt: skip
    fields, problems = read(read_metrics, {"cutoffs": [1, True]}, "metrics")
    assert fields == {"cutoffs": DEFAULT_CUTOFFS, "lead_cutoffs": ()}
    assert len(problems) == 1 and problems[0].startswith("expected integers, got [1, True]: ")
    assert problems[0].endswith(" @ metrics.cutoffs")


def test_timing_and_its_latency_mode() -> None:
    fields, problems = read(read_timing, {"latency": "all", "latency_sample": 9, "latency_seed": 2, "warmup": 0},
                            "timing")  # fmt: skip
    assert problems == []
    assert fields == {"warmup": 0, "batch_size": 64, "query_limit": None,
                      "timing": TimingPlan(mode=LatencyMode.ALL, sample_size=9, seed=2)}  # fmt: skip
    fields, problems = read(read_timing, {"latency": "some"}, "timing")
    assert fields["timing"] == TimingPlan() and problems == ["'some' is not one of all, sample, off @ timing.latency"]


def test_gates_and_load_absent_or_read_whole() -> None:
    assert read(read_gates, {}, "gates", present=False) == ({"gates": None}, [])
    assert read(read_gates, {"file": "strict", "extra": 1}, "gates") == ({"gates": {"file": "strict", "extra": 1}}, [])
    fields, problems = read(read_gates, {"file": "a\x00b"}, "gates")
    assert fields == {"gates": {"file": "a\x00b"}} and len(problems) == 1 and problems[0].endswith(" @ gates.file")
    assert read(read_load, {}, "load", present=False) == ({"load": None}, [])
    fields, problems = read(read_load, {"rounds": 2, "duration": 2}, "load")
    assert fields == {"load": LoadSettings(rounds=2, duration_s=2.0)} and problems == []
    _, problems = read(read_load, {"rounds": 1}, "load")
    assert problems == ["must be within 2..20 (two or more windows give the spread a gate needs), got 1 @ load.rounds"]


def test_traffic_text_missing_is_query_and_given_blank_is_refused_not_the_default() -> None:
    from rag_eval.traffic.logs import spec_problems

    fields, problems = read(read_traffic, {"path": "log.jsonl"}, "traffic")
    assert fields["traffic"].text == "query" and problems == [] and not spec_problems(fields["traffic"])
    for blank in ("", "  "):
        fields, problems = read(read_traffic, {"path": "log.jsonl", "text": blank}, "traffic")
        assert [p.key for p in spec_problems(fields["traffic"])] == ["traffic.text"], blank
    fields, _ = read(read_traffic, {"path": "log.jsonl", "text": "q", "category": "q"}, "traffic")
    assert [str(p) for p in spec_problems(fields["traffic"])] == [
        "'q' is the text field: each request would be filtered by its own query @ traffic.category"]  # fmt: skip
