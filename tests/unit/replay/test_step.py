"""The replay step's parts that need no Milvus: what a resumed run must share with the run it continues,
the refusal of a search mode the backend does not perform, the queries replayed (and their vectors
resolved first), and the execution settings' defaults. The replay itself: tests/integration."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

import pytest

from rag_eval.core.errors import UnsupportedFeatureError
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import SearchMode
from rag_eval.datasets.beir import Query
from rag_eval.experiment import load_experiment
from rag_eval.replay import provenance, step
from rag_eval.replay.prepare import Progress
from rag_eval.replay.step import Execution, preflight, run_identity
from tests.conftest import SHIPPED

EXP = load_experiment(SHIPPED / "experiments" / "default.toml")


def prepared(existing: Any = None, queries: dict[str, Query] | None = None, resolver: Any = None) -> Any:
    dataset = SimpleNamespace(checksum="sum", queries=queries or {})
    return cast(Any, SimpleNamespace(dataset=dataset, labels=SimpleNamespace(level="span"), existing=existing,
                                     resolver=resolver, traffic=None, traffic_queries=list))  # fmt: skip


def test_what_a_resumed_run_must_share_with_the_run_it_continues(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance, "git_commit", lambda: {"commit": "c0ffee", "dirty": False})
    identity = run_identity(EXP, prepared())
    assert identity == {
        "experiment": "incident-kb-legacy-vs-evidence", "data set checksum": "sum", "split": "test",
        "chunker": "sentences:size=3,overlap=0", "labels": ["span", 1], "embedder": [EXP.embedder_model, True],
        "ingest profile": EXP.profile.as_dict(), "index": EXP.index.to_json(),
        "configs": {c.name: c.config_hash() for c in EXP.configs}, "baseline": "legacy-merge",
        "batch size": EXP.batch_size, "query limit": None, "code": "c0ffee",
    }  # fmt: skip
    assert "uri" not in str(identity).lower()  # a Milvus URI as spelled is not part of it
    with_collection = run_identity(EXP, prepared(existing=SimpleNamespace(fingerprint="fp")))
    assert with_collection["collection"] == "fp"
    monkeypatch.setattr(provenance, "git_commit", lambda: {"commit": None, "dirty": None})
    assert run_identity(EXP, prepared())["code"] == provenance.package_version("rag-eval")


def test_a_search_mode_the_backend_does_not_perform_is_refused_naming_the_config() -> None:
    asked: list[tuple[SearchMode, str]] = []

    class Port:
        def check_mode(self, mode: SearchMode, *, config: str) -> None:
            asked.append((mode, config))
            if mode is SearchMode.HYBRID:
                raise UnsupportedFeatureError(f"{config}: hybrid search is not supported", feature="hybrid")

    preflight(EXP, cast(Any, Port()))
    assert asked == [(SearchMode.DENSE, c.name) for c in EXP.configs]
    hybrid = replace(EXP, configs=(*EXP.configs[:1], replace(EXP.configs[1], mode=SearchMode.HYBRID)))
    with pytest.raises(UnsupportedFeatureError, match="legacy-first: hybrid search is not supported"):
        preflight(hybrid, cast(Any, Port()))


class Resolver:
    def __init__(self, stored: set[str]) -> None:
        self.stored = stored
        self.resolved: list[str] = []

    def missing(self, texts: list[str]) -> list[str]:
        return [t for t in texts if t not in self.stored]

    def resolve(self, texts: list[str], progress: Any = None) -> None:
        self.resolved.extend(texts)


def test_the_queries_replayed_in_order_up_to_the_limit_their_missing_vectors_resolved_first() -> None:
    queries = {q: Query(id=q, text=f"Why does {q.upper()} fail?") for q in ("q1", "q2", "q3")}
    normal = [KnowledgeQueryTransformer().transform(q.text).normalized_query for q in queries.values()]
    resolver = Resolver(stored={normal[0]})
    got = step._queries(EXP, prepared(queries=queries, resolver=resolver), Progress(quiet=True))
    assert got == ([("q1", "Why does Q1 fail?"), ("q2", "Why does Q2 fail?"), ("q3", "Why does Q3 fail?")], normal)
    assert resolver.resolved == normal[1:]
    limited = step._queries(replace(EXP, query_limit=2), prepared(queries=queries, resolver=Resolver(set(normal))),
                            Progress(quiet=True))  # fmt: skip
    assert limited == ([("q1", "Why does Q1 fail?"), ("q2", "Why does Q2 fail?")], normal[:2])


def test_the_execution_settings_default_to_one_process_a_fresh_run_and_no_foreign_directory() -> None:
    assert Execution() == Execution(progress=None, cluster=None, resume=False, force_out=False)
