"""Replay: every labelled query through the production pipeline, under every config.

For each batch of queries:

1. transform each query (L0 hints);
2. time each config's own search at its own retrieve-k, serially, one query per call,
   ``perf_counter_ns`` around the call, after a warm-up that is not recorded (configs
   asking the identical request share one measurement);
3. retrieve ONCE per search signature (mode, category filter, group size) at the
   largest retrieve-k any config of that signature needs, with batched search calls;
4. run each config's post-process, packing and projection on its first retrieve-k of
   those shared hits (configs that differ only after retrieval never query Milvus again);
5. write the batch's rows (one per query and config) to the run store.

With an approximate index (HNSW) the first k of a wider search can differ slightly from
a search at k; the latency columns always come from the search at the config's own k.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from rag_eval.core.lookup import Pipeline
from rag_eval.core.ports import BatchKnowledgeSearchPort, KnowledgeSearchPort
from rag_eval.core.transform import KnowledgeQueryTransformer, QueryHints
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode
from rag_eval.harness.experiment import ConfigSpec
from rag_eval.harness.rows import Truth, build_row
from rag_eval.harness.store import RunStore

Tick = Callable[[str, int], None]


@dataclass(frozen=True, slots=True)
class Signature:
    """What makes two configs' searches differ before retrieve-k."""

    mode: SearchMode
    category_filter: str | None
    group_size: int  # only meaningful for GROUPED

    @classmethod
    def of(cls, spec: ConfigSpec) -> Signature:
        c = spec.config
        group = c.max_chunks_per_document if spec.mode is SearchMode.GROUPED else 1
        return cls(spec.mode, c.category_filter, group)

    def request(self, query: str, top_k: int) -> KnowledgeSearchRequest:
        return KnowledgeSearchRequest(
            query=query, top_k=top_k, category_filter=self.category_filter, mode=self.mode, group_size=self.group_size
        )


def batches(n: int, size: int) -> list[range]:
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


class Replayer:
    def __init__(
        self,
        port: KnowledgeSearchPort,
        configs: Sequence[ConfigSpec],
        truth: Truth,
        *,
        transformer: KnowledgeQueryTransformer | None = None,
        warmup: int = 5,
        tick: Tick | None = None,
    ) -> None:
        self.port = port
        self.configs = list(configs)
        self.truth = truth
        self.transformer = transformer or KnowledgeQueryTransformer()
        self.warmup = warmup
        self.tick = tick or (lambda phase, n: None)
        self.signatures: dict[Signature, list[ConfigSpec]] = {}
        for spec in self.configs:
            self.signatures.setdefault(Signature.of(spec), []).append(spec)
        self._warmed: set[tuple[Signature, int]] = set()

    def run(
        self,
        queries: Sequence[tuple[str, str]],
        store: RunStore,
        *,
        batch_size: int,
        skip: AbstractSet[int] = frozenset(),
    ) -> int:
        """Replay ``queries`` ((id, text) pairs) in batches; returns the batches run now."""
        ran = 0
        for number, idx in enumerate(batches(len(queries), batch_size)):
            if number in skip:
                self.tick("skipped", len(idx))
                continue
            rows = self.run_batch([(i, *queries[i]) for i in idx])
            store.write_batch(number, rows)
            ran += 1
        return ran

    def run_batch(self, batch: Sequence[tuple[int, str, str]]) -> list[dict[str, object]]:
        clock = time.perf_counter_ns
        hints: list[QueryHints] = []
        transform_ns: list[int] = []
        for _, _, text in batch:
            t0 = clock()
            hints.append(self.transformer.transform(text))
            transform_ns.append(clock() - t0)

        # Timing first: it searches every query once before the hits that are kept are fetched. A Milvus
        # 2.3 server answers the first search of a query vector after a load differently from every later
        # one (measured on ClapNQ: 65 of 256 queries differ, later searches all agree), so the kept hits
        # always come from a later search and a run right after ingest equals any later run.
        search_us = self._time_searches(hints)

        shared: dict[Signature, list[tuple[KnowledgeSearchHit, ...]]] = {}
        for sig, specs in self.signatures.items():
            width = max(s.config.retrieve_k for s in specs)
            requests = [sig.request(h.normalized_query, width) for h in hints]
            shared[sig] = self._search_many(requests)
            self.tick("retrieve", len(batch))

        rows: list[dict[str, object]] = []
        for sig, specs in self.signatures.items():
            for spec in specs:
                pipeline = Pipeline(spec.config, spec.postprocessor())
                for j, (index, qid, _) in enumerate(batch):
                    record = pipeline.process(hints[j], shared[sig][j], transform_ns=transform_ns[j])
                    rows.append(
                        build_row(
                            query_id=qid,
                            query_index=index,
                            config=spec.name,
                            record=record,
                            truth=self.truth,
                            search_us=search_us[(sig, spec.config.retrieve_k)][j],
                        )
                    )
                self.tick("post-process", len(batch))
        order = {spec.name: i for i, spec in enumerate(self.configs)}
        rows.sort(key=lambda r: (order[str(r["config"])], int(r["query_index"])))  # type: ignore[call-overload]
        return rows

    def _search_many(self, requests: list[KnowledgeSearchRequest]) -> list[tuple[KnowledgeSearchHit, ...]]:
        if isinstance(self.port, BatchKnowledgeSearchPort):
            return self.port.search_batch(requests)
        return [self.port.search(r) for r in requests]

    def _time_searches(self, hints: Sequence[QueryHints]) -> dict[tuple[Signature, int], list[float]]:
        out: dict[tuple[Signature, int], list[float]] = {}
        clock = time.perf_counter_ns
        for sig, specs in self.signatures.items():
            for k in sorted({s.config.retrieve_k for s in specs}):
                if (sig, k) not in self._warmed:
                    for h in list(hints)[: self.warmup]:
                        self.port.search(sig.request(h.normalized_query, k))
                    self._warmed.add((sig, k))
                timings = []
                for h in hints:
                    request = sig.request(h.normalized_query, k)
                    t0 = clock()
                    self.port.search(request)
                    timings.append((clock() - t0) / 1e3)
                out[(sig, k)] = timings
                self.tick("timing", len(hints))
        return out
