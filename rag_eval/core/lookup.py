"""The module flow and the agent tool ``lookup_knowledge(query)`` (input unchanged).

:class:`LookupKnowledge` is transform (L0 hints), search, then :class:`Pipeline`: everything after the search
(candidates with identity, post-process, pack and assemble, project), kept apart so a replay can run several
configs on one shared list of hits. The flow stage by stage: docs/pipeline.md.

>>> from rag_eval.search.memory import InMemorySearch
>>> port = InMemorySearch.scripted({"why is the replica behind": [
...     dict(id="1", content="Check the SQL thread.", score=0.9, doc_id="lag", chunk_index=0, source="lag.md")]})
>>> tool = LookupKnowledge(port)
>>> tool.lookup_knowledge("why is the replica behind").document_ids
('lag#chunk-0',)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from rag_eval.core.config import PipelineKind, RagConfig
from rag_eval.core.packing import EvidencePacker, LegacyPacker, RagResult, RagResultAssembler
from rag_eval.core.ports import KnowledgeSearchPort
from rag_eval.core.postprocess import (
    EvidencePostProcessor,
    LegacyFirstPostProcessor,
    LegacyPostProcessor,
    PostProcessOutcome,
)
from rag_eval.core.projector import ProjectedPayload, RagResultProjector
from rag_eval.core.transform import KnowledgeQueryTransformer, QueryHints
from rag_eval.core.types import (
    Candidates,
    KnowledgeSearchHit,
    KnowledgeSearchRequest,
    RetrievedEvidenceCandidate,
    SearchMode,
    fast_constructor,
)

PostProcessor = Callable[[Iterable[RetrievedEvidenceCandidate]], PostProcessOutcome]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTimings:
    """Nanoseconds spent in each stage of one lookup (``perf_counter_ns``)."""

    transform_ns: int = 0
    search_ns: int = 0
    postprocess_ns: int = 0  # candidates + post-process + pack + assemble
    projection_ns: int = 0

    @property
    def total_ns(self) -> int:
        return self.transform_ns + self.search_ns + self.postprocess_ns + self.projection_ns


@dataclass(frozen=True, slots=True, kw_only=True)
class LookupRecord:
    """Everything one lookup produced, stage by stage (the harness reads this)."""

    hints: QueryHints
    hits: tuple[KnowledgeSearchHit, ...]
    candidates: Candidates  # a sequence of RetrievedEvidenceCandidate, made when read
    outcome: PostProcessOutcome
    result: RagResult
    payload: ProjectedPayload
    timings: StageTimings = field(default_factory=StageTimings)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Post-search part of the flow for one config: candidates -> post-process -> pack ->
    assemble -> project. Chooses the evidence (D1-D5) or a legacy pipeline's components
    from ``config.pipeline``. ``postprocess`` replaces the post-processor the config
    would choose (an evaluation "what if"; production never sets it).
    """

    config: RagConfig
    postprocess: PostProcessor | None = None
    # the components, chosen once (building them per lookup cost more than a small post-process)
    _components: tuple[PostProcessor, EvidencePacker | LegacyPacker, RagResultProjector, int] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_components", (self._postprocessor(), self._packer(), self._projector(), self.config.retrieve_k)
        )

    @property
    def postprocessor(self) -> PostProcessor:
        return self._components[0]

    @property
    def packer(self) -> EvidencePacker | LegacyPacker:
        return self._components[1]

    @property
    def projector(self) -> RagResultProjector:
        return self._components[2]

    def _postprocessor(self) -> PostProcessor:
        if self.postprocess is not None:
            return self.postprocess
        kind = self.config.pipeline
        if kind is PipelineKind.LEGACY_MERGE:
            return LegacyPostProcessor(top_k=self.config.return_n)
        if kind is PipelineKind.LEGACY_FIRST:
            return LegacyFirstPostProcessor(top_k=self.config.return_n)
        return EvidencePostProcessor(
            return_n=self.config.return_n, max_chunks_per_document=self.config.max_chunks_per_document
        )

    def _packer(self) -> EvidencePacker | LegacyPacker:
        return LegacyPacker() if self.config.pipeline is PipelineKind.LEGACY_MERGE else EvidencePacker()

    def _projector(self) -> RagResultProjector:
        c = self.config
        return RagResultProjector(
            max_excerpt_chars=c.max_excerpt_chars, max_total_chars=c.max_total_chars, max_blocks=c.max_blocks
        )

    def request(self, hints: QueryHints, mode: SearchMode = SearchMode.DENSE) -> KnowledgeSearchRequest:
        return KnowledgeSearchRequest(
            query=hints.normalized_query,
            top_k=self.config.retrieve_k,
            category_filter=self.config.category_filter,
            mode=mode,
            group_size=self.config.max_chunks_per_document,
        )

    def process(
        self, hints: QueryHints, hits: Sequence[KnowledgeSearchHit], *, search_ns: int = 0, transform_ns: int = 0
    ) -> LookupRecord:
        """Run everything after the search on ``hits``; only the first ``retrieve_k`` are used,
        so hits retrieved once at a larger width can be shared between configs."""
        clock = time.perf_counter_ns
        t0 = clock()
        postprocessor, packer, projector, retrieve_k = self._components
        candidates = Candidates.from_hits(hits if len(hits) <= retrieve_k else hits[:retrieve_k])
        outcome = postprocessor(candidates)
        result = _ASSEMBLER.assemble(hints, packer.pack(outcome.selected), outcome)
        t1 = clock()
        payload = projector.project(result)
        t2 = clock()
        timings = _new_timings(transform_ns, search_ns, t1 - t0, t2 - t1)
        return _new_record(hints, candidates.hits, candidates, outcome, result, payload, timings)


_ASSEMBLER = RagResultAssembler()
_new_timings = fast_constructor(StageTimings)
_new_record = fast_constructor(LookupRecord)


class LookupKnowledge:
    """The agent tool. ``lookup_knowledge(query)`` keeps its one-argument input; the
    configuration is the service's, not the agent's.
    """

    def __init__(
        self,
        port: KnowledgeSearchPort,
        config: RagConfig | None = None,
        *,
        transformer: KnowledgeQueryTransformer | None = None,
        mode: SearchMode = SearchMode.DENSE,
    ) -> None:
        self.port = port
        self.pipeline = Pipeline(config or RagConfig())
        self.transformer = transformer or KnowledgeQueryTransformer()
        self.mode = mode

    def run(self, query: str) -> LookupRecord:
        clock = time.perf_counter_ns
        t0 = clock()
        hints = self.transformer.transform(query)
        t1 = clock()
        hits = self.port.search(self.pipeline.request(hints, self.mode))
        t2 = clock()
        return self.pipeline.process(hints, hits, search_ns=t2 - t1, transform_ns=t1 - t0)

    def lookup_knowledge(self, query: str) -> ProjectedPayload:
        """The tool: query in, projected payload out (``payload.as_dict()`` is its JSON)."""
        return self.run(query).payload

    __call__ = lookup_knowledge
