"""The production pipeline of the chunk evidence identity design (D1-D6), stdlib only.

Importing this package loads nothing outside the standard library and ``rag_eval.core``.
"""

from rag_eval.core.config import PipelineKind, RagConfig
from rag_eval.core.errors import ConfigError, ConfigProblem, RagEvalError
from rag_eval.core.guard import EvidenceGuard, GuardReport
from rag_eval.core.identity import evidence_key
from rag_eval.core.lookup import LookupKnowledge, LookupRecord, Pipeline, StageTimings
from rag_eval.core.packing import EvidencePacker, LegacyPacker, RagResult, RagResultAssembler
from rag_eval.core.ports import BatchKnowledgeSearchPort, KnowledgeSearchPort
from rag_eval.core.postprocess import (
    EvidencePostProcessor,
    LegacyFirstPostProcessor,
    LegacyPostProcessor,
    PostProcessOutcome,
    SelectedEvidence,
    Stage,
    TraceEntry,
)
from rag_eval.core.projector import Budget, BudgetCut, ProjectedExcerpt, ProjectedPayload, RagResultProjector
from rag_eval.core.transform import KnowledgeQueryTransformer, QueryHints
from rag_eval.core.types import (
    EvidenceBlock,
    HitReason,
    KnowledgeSearchHit,
    KnowledgeSearchRequest,
    RetrievedEvidenceCandidate,
    SearchMode,
    to_candidates,
)

__all__ = [
    "BatchKnowledgeSearchPort",
    "Budget",
    "BudgetCut",
    "ConfigError",
    "ConfigProblem",
    "EvidenceBlock",
    "EvidenceGuard",
    "EvidencePacker",
    "EvidencePostProcessor",
    "GuardReport",
    "HitReason",
    "KnowledgeQueryTransformer",
    "KnowledgeSearchHit",
    "KnowledgeSearchPort",
    "KnowledgeSearchRequest",
    "LegacyFirstPostProcessor",
    "LegacyPacker",
    "LegacyPostProcessor",
    "LookupKnowledge",
    "LookupRecord",
    "Pipeline",
    "PipelineKind",
    "PostProcessOutcome",
    "ProjectedExcerpt",
    "ProjectedPayload",
    "QueryHints",
    "RagConfig",
    "RagEvalError",
    "RagResult",
    "RagResultAssembler",
    "RagResultProjector",
    "RetrievedEvidenceCandidate",
    "SearchMode",
    "SelectedEvidence",
    "Stage",
    "StageTimings",
    "TraceEntry",
    "evidence_key",
    "to_candidates",
]
