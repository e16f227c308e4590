"""KnowledgeQueryTransformer: L0 hints (query normalisation, keyword hints).

L0 is hint-only; L1 is fact evidence. The hints travel beside the evidence in the
projected payload (``payload.hints``) and are never turned into evidence blocks:
nothing in post-processing, packing or projection reads them, and EvidenceGuard
does not accept a hint as a reference.

>>> hints = KnowledgeQueryTransformer().transform("  Replica lag  on db-7?? ERROR 1205 ")
>>> hints.normalized_query
'Replica lag on db-7?? ERROR 1205'
>>> hints.keywords
('replica', 'lag', 'db-7', 'error', '1205')
>>> hints.identifiers
('db-7', 'ERROR 1205')
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_WORD = re.compile(r"[\w][\w.\-/]*[\w]|[\w]", re.UNICODE)
_IDENTIFIER = re.compile(r"\b(?:ERROR\s+\d{3,5}|[A-Z][A-Z0-9]*_[A-Z0-9_]+|[a-z]+_[a-z0-9_]+|[a-z]+-\d+|\d{4,5})\b")
_STOPWORDS = frozenset(
    """
    a an and are as at be by can do does for from how i in is it its me my of on or our so that the
    their then there this to up was we what when where which who why will with you your after
    before should would could not no any all get got has have had into over still just very keep
    keeps
    """.split()
)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryHints:
    """L0: what the transformer derived from the raw query. Hints, never evidence."""

    original_query: str
    normalized_query: str
    keywords: tuple[str, ...]
    identifiers: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "level": "L0",
            "normalized_query": self.normalized_query,
            "keywords": list(self.keywords),
            "identifiers": list(self.identifiers),
        }


@dataclass(frozen=True, slots=True)
class KnowledgeQueryTransformer:
    """Normalises the query (Unicode NFKC, whitespace collapsed, trimmed) and extracts
    keyword hints (lower-cased, stop words removed, first occurrence order) and
    identifier hints (error codes, ``snake_case`` variables, host names like ``db-7``).

    The normalised query is what the search port receives, so replays and
    production see the same text.
    """

    max_keywords: int = 12

    def transform(self, query: str) -> QueryHints:
        normalized = " ".join(unicodedata.normalize("NFKC", query).split())
        keywords: list[str] = []
        for word in _WORD.findall(normalized.lower()):
            if word not in _STOPWORDS and word not in keywords:
                keywords.append(word)
        identifiers: list[str] = []
        for match in _IDENTIFIER.finditer(normalized):
            ident = " ".join(match.group().split())
            if ident not in identifiers:
                identifiers.append(ident)
        return QueryHints(
            original_query=query,
            normalized_query=normalized,
            keywords=tuple(keywords[: self.max_keywords]),
            identifiers=tuple(identifiers),
        )
