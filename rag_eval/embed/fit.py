"""Does the ``[embedder]`` fit the collection? Self-retrieval of a seeded sample of its rows.

Query vectors of another model than the one a collection was embedded with search it without any error
and return near-random neighbours. So before any query is replayed, the stored text of ``fit_sample`` rows
(drawn with ``fit_seed``) is embedded with the configured model and searched: with the right model a row's
own vector is its nearest neighbour, and it (or a row with the same text, a copy) is among its first
``fit_k`` hits. The share of rows that find themselves is the self-retrieval rate; below ``fit_min`` the
run is refused (exit 2). This module only counts; the harness embeds and searches.

>>> rows = [("1", "alpha"), ("2", "beta"), ("3", "gamma")]
>>> hits = [[("1", "alpha")], [("9", "beta")], [("5", "x"), ("3", "gamma")]]
>>> self_retrieved(rows, hits, k=1)
2
>>> FitResult(sampled=50, found=3, k=10, minimum=0.5, seed=0, model_id="m").message("kb")  # doctest: +ELLIPSIS
'the [embedder] does not look like the model this collection was embedded with: 3 of 50 rows of kb find ...'
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Row = tuple[str, str]  # (primary key, stored text)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitResult:
    """How many of the sampled rows found themselves among their first ``k`` hits."""

    sampled: int
    found: int
    k: int
    minimum: float
    seed: int
    model_id: str
    not_checked: str | None = None  # why the check could not run (no model here to embed the rows with)

    @classmethod
    def skipped(cls, why: str, *, model_id: str, k: int, minimum: float, seed: int) -> FitResult:
        """A check that could not run, and why (it refuses nothing)."""
        return cls(sampled=0, found=0, k=k, minimum=minimum, seed=seed, model_id=model_id, not_checked=why)

    @property
    def rate(self) -> float:
        return self.found / self.sampled if self.sampled else 1.0

    @property
    def fits(self) -> bool:
        return self.not_checked is not None or self.rate >= self.minimum

    def as_dict(self) -> dict[str, Any]:
        if self.not_checked is not None:
            return {"model_id": self.model_id, "checked": False, "why": self.not_checked, "fits": True}
        return {"checked": True, "model_id": self.model_id, "rows_sampled": self.sampled,
                "rows_found_themselves": self.found, "self_retrieval_rate": round(self.rate, 4), "k": self.k,
                "fit_min": self.minimum, "seed": self.seed, "fits": self.fits}  # fmt: skip

    def message(self, collection: str) -> str:
        return (
            f"the [embedder] does not look like the model this collection was embedded with: {self.found} of "
            f"{self.sampled} rows of {collection} find themselves among their first {self.k} hits "
            f"({self.rate:.0%}, under embedder.fit_min = {self.minimum:g}): give the model the collection was "
            "embedded with (its provider, model and dimensions), or set fit_min = 0 to measure anyway"
        )


def sample_rows(rows: Sequence[Row], n: int, seed: int) -> list[Row]:
    """``n`` rows with text, drawn with ``seed`` from the rows ordered by key (the same rows whatever order
    they were read in).

    >>> sample_rows([("b", "x"), ("a", "y"), ("c", " ")], 5, 0)
    [('a', 'y'), ('b', 'x')]
    """
    ordered = sorted((r for r in rows if r[1].strip()), key=lambda r: r[0])
    if len(ordered) <= n:
        return ordered
    picked = random.Random(seed).sample(range(len(ordered)), n)
    return [ordered[i] for i in sorted(picked)]


def self_retrieved(rows: Sequence[Row], hits: Sequence[Sequence[Row]], *, k: int) -> int:
    """How many ``rows`` have themselves (same key) or a copy (same text) among the first ``k`` of their hits."""
    found = 0
    for (pk, text), row_hits in zip(rows, hits, strict=True):
        if any(hit_pk == pk or hit_text == text for hit_pk, hit_text in row_hits[:k]):
            found += 1
    return found
