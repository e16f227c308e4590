"""What to label next: the traffic queries the configs disagree on most, stratified by how often they occur,
written to a file a person marks, chunk by chunk.

:func:`select_for_labelling` picks the queries (the rules: docs/traffic.md, "What to label next");
:func:`write_labelling_file` writes one JSON object a line per picked query, every delivered chunk with
``"grade": null`` for a person to set; :func:`import_labels` (:mod:`rag_eval.traffic.imports`) turns the marked
file into the data set's queries and span qrels.

>>> a = Candidate(query_id="a", text="Replica lag", count=40, disagreement=0.5, delivered=())
>>> b = Candidate(query_id="b", text="replica  LAG", count=3, disagreement=0.9, delivered=())
>>> c = Candidate(query_id="c", text="disk full", count=1, disagreement=0.0, delivered=())
>>> d = Candidate(query_id="d", text="dead lock", count=2, disagreement=0.2, delivered=())
>>> [p.query_id for p in select_for_labelling([a, b, c, d], count=5, labelled_texts=["Dead  Lock"])]
['a']
"""

from __future__ import annotations

import operator
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from rag_eval.core.errors import DatasetError
from rag_eval.datasets.chunking import Chunk
from rag_eval.traffic.imports import ImportResult, import_labels
from rag_eval.traffic.marks import json_line, normalise_query, query_id_problem

# strata by how often a query occurs in the log: (lowest count, highest count or None, name)
STRATA: tuple[tuple[int, int | None, str], ...] = ((1, 1, "1"), (2, 9, "2-9"), (10, 99, "10-99"), (100, None, "100+"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivered:
    """One chunk some config delivered for the query."""

    chunk: str  # the true chunk key "<doc_id>#chunk-<n>" (Chunk.key)
    configs: tuple[str, ...]  # the configs that delivered it, in the experiment's config order


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A traffic query the configs were replayed on."""

    query_id: str
    text: str
    count: int  # occurrences in the log
    disagreement: float  # 1 - RBO, the largest over the candidate configs (0 = all agree)
    delivered: tuple[Delivered, ...]  # the union of the configs' delivered chunks, first-seen order

    def __post_init__(self) -> None:
        # numpy scalars (a column of a frame) become Python's, which JSON writes
        count = _integer(self.count) if not isinstance(self.count, bool) else None
        if count is None or count < 1:
            raise ValueError(f"count of {self.query_id!r} must be an integer >= 1, got {self.count!r}")
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "disagreement", float(self.disagreement))
        if not 0.0 <= self.disagreement <= 1.0:  # NaN fails too
            raise ValueError(f"disagreement of {self.query_id!r} must be within [0, 1], got {self.disagreement!r}")


def _integer(value: object) -> int | None:
    """``value`` as a Python int when it is an integer of any kind (int, numpy.int64), else None."""
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkText:
    """Where a delivered chunk lies and what it says; ``doc_id``, ``start`` and ``end`` are all None for a row the
    harness could not place in a document (its text, when known, is still shown)."""

    doc_id: str | None
    start: int | None
    end: int | None
    text: str | None
    title: str = ""

    def __post_init__(self) -> None:
        placed = (self.doc_id, self.start, self.end)
        if any(v is None for v in placed) and any(v is not None for v in placed):
            raise ValueError(f"doc_id, start and end are all given or all None, got {placed!r}")
        for name in ("start", "end"):
            if (value := getattr(self, name)) is not None:
                if (offset := _integer(value)) is None or isinstance(value, bool):
                    raise ValueError(f"{name} must be an integer, got {value!r}")
                object.__setattr__(self, name, offset)

    @classmethod
    def of(cls, chunk: Chunk) -> ChunkText:
        return cls(doc_id=chunk.doc_id, start=chunk.start, end=chunk.end, text=chunk.content, title=chunk.title)


@dataclass(frozen=True, slots=True, kw_only=True)
class Screened:
    """The candidates that may be picked, and how many were set aside by each rule."""

    eligible: tuple[Candidate, ...]
    labelled: int  # their text is in the labelled set already
    duplicates: int  # the same text as a more frequent candidate
    agreed: int  # disagreement 0: nothing to decide


def stratum(count: int) -> int:
    """Index in :data:`STRATA` of a query occurring ``count`` times.

    >>> [STRATA[stratum(c)][2] for c in (1, 2, 9, 10, 99, 100, 10**9)]
    ['1', '2-9', '2-9', '10-99', '10-99', '100+', '100+']
    """
    return next(i for i, (low, high, _) in enumerate(STRATA) if low <= count and (high is None or count <= high))


def _order(c: Candidate) -> tuple[float, int, str]:
    """Disagreement descending, then count descending, then query id: a total order over distinct ids."""
    return (-c.disagreement, -c.count, c.query_id)


def screen(candidates: Iterable[Candidate], labelled_texts: Collection[str]) -> Screened:
    """Drop what is labelled already (texts compared normalised: :func:`normalise_query`), keep the most frequent
    of each normalised text (then the larger disagreement, then the smaller id), then drop disagreement 0."""
    labelled = {normalise_query(t) for t in labelled_texts}
    by_text: dict[str, list[Candidate]] = {}
    ids: set[str] = set()
    n_labelled = 0
    for c in candidates:
        if c.query_id in ids:
            raise ValueError(f"query id {c.query_id!r} is given twice")
        ids.add(c.query_id)
        key = normalise_query(c.text)
        if key in labelled:
            n_labelled += 1
        else:
            by_text.setdefault(key, []).append(c)
    kept = [min(group, key=lambda c: (-c.count, -c.disagreement, c.query_id)) for group in by_text.values()]
    duplicates = sum(len(group) - 1 for group in by_text.values())
    eligible = tuple(sorted((c for c in kept if c.disagreement > 0), key=_order))
    return Screened(eligible=eligible, labelled=n_labelled, duplicates=duplicates, agreed=len(kept) - len(eligible))


def _largest_remainder(weights: Mapping[int, int], seats: int) -> dict[int, int]:
    """``seats`` shared in proportion to ``weights`` (Hamilton): floors, then one more each in order of the
    largest remainder (ties: the larger weight, then the lower index)."""
    total = sum(weights.values())
    quotas = {i: Fraction(seats * w, total) for i, w in weights.items()}
    out = {i: int(q) for i, q in quotas.items()}
    order = sorted(weights, key=lambda i: (-(quotas[i] - out[i]), -weights[i], i))
    for i in order[: seats - sum(out.values())]:
        out[i] += 1
    return out


def allocate(traffic: Sequence[int], sizes: Sequence[int], picks: int) -> list[int]:
    """Picks per stratum: ``min(picks, sum(sizes))`` shared by largest remainder in proportion to each stratum's
    ``traffic``, never more than its ``sizes`` (a full stratum's surplus is shared again among the others), and
    at least one for every non-empty stratum while picks remain (taken from the stratum with the most picks; when
    there are fewer picks than non-empty strata, the strata with the most traffic get one each).

    >>> allocate([3, 20, 300, 5000], [3, 4, 10, 20], 10)
    [1, 1, 1, 7]
    >>> allocate([10, 10, 0, 0], [2, 5, 0, 0], 6)
    [2, 4, 0, 0]
    """
    n = min(picks, sum(sizes))
    alloc = [0] * len(sizes)
    filled = [i for i, size in enumerate(sizes) if size > 0]
    if n < len(filled):
        for i in sorted(filled, key=lambda i: (-traffic[i], i))[:n]:
            alloc[i] = 1
        return alloc
    open_, remaining = list(filled), n
    while open_:
        shares = _largest_remainder({i: traffic[i] for i in open_}, remaining)
        full = [i for i in open_ if shares[i] >= sizes[i]]
        if not full:
            for i in open_:
                alloc[i] = shares[i]
            break
        for i in full:
            alloc[i] = sizes[i]
            remaining -= sizes[i]
            open_.remove(i)
    for i in filled:
        if alloc[i] == 0:
            donor = min((j for j in filled if alloc[j] > 1), key=lambda j: (-alloc[j], -traffic[j], j))
            alloc[donor] -= 1
            alloc[i] = 1
    return alloc


def select_for_labelling(
    candidates: Sequence[Candidate], *, count: int, labelled_texts: Collection[str]
) -> list[Candidate]:
    """The ``count`` queries to label next (fewer when fewer are eligible), most contested first: see
    :func:`screen` for what is eligible and :func:`allocate` for how the picks are shared among the strata by
    traffic; within a stratum, by disagreement descending, then count descending, then query id."""
    if count <= 0:
        raise ValueError(f"count must be >= 1, got {count}")
    eligible = screen(candidates, labelled_texts).eligible
    members: list[list[Candidate]] = [[] for _ in STRATA]
    for c in eligible:  # in the order of _order already
        members[stratum(c.count)].append(c)
    traffic = [sum(c.count for c in group) for group in members]
    shares = allocate(traffic, [len(group) for group in members], count)
    return sorted((c for group, k in zip(members, shares, strict=True) for c in group[:k]), key=_order)


def labelling_lines(picked: Sequence[Candidate], chunks: Mapping[str, ChunkText]) -> list[str]:
    """The lines of a labelling file (JSON, one query each; see :func:`write_labelling_file`)."""
    lines = []
    for c in picked:
        entries = []
        for d in c.delivered:
            where = chunks.get(d.chunk) or ChunkText(doc_id=None, start=None, end=None, text=None, title="")
            entries.append({
                "chunk": d.chunk, "doc_id": where.doc_id, "start": where.start, "end": where.end,
                "title": where.title if where.doc_id is not None else (where.title or None), "text": where.text,
                "delivered_by": list(d.configs), "grade": None,
            })  # fmt: skip
        line = {"query_id": c.query_id, "query": c.text, "count": c.count, "disagreement": c.disagreement}
        lines.append(json_line({**line, "chunks": entries}))
    return lines


def write_labelling_file(
    path: str | Path, picked: Sequence[Candidate], chunks: Mapping[str, ChunkText], *, force: bool = False
) -> Path:
    """Write the labelling file of ``picked`` at ``path``: atomically (a temporary file beside it, then renamed),
    readable by its owner only (query texts may be personal data), never over an existing file unless ``force``
    (a person's marks must not be lost). A query id that the import would refuse is refused here, before a person
    spends time on it."""
    target = Path(path)
    for c in picked:
        if why := query_id_problem(c.query_id):
            raise DatasetError(f"query id {why}; the marks could never be imported", path=str(target), field="query_id")
    data = "".join(line + "\n" for line in labelling_lines(picked, chunks)).encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if force:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _link_new(tmp: Path, target: Path) -> None:
    """Give ``tmp`` the name ``target`` unless something has that name (a hard link fails then, in one step)."""
    refusal = DatasetError(
        "already exists: it may hold a person's marks; give another path, or force to replace it", path=str(target)
    )
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise refusal from None
    except OSError:  # a file system without hard links: check, then rename
        if target.exists() or target.is_symlink():
            raise refusal from None
        os.replace(tmp, target)


__all__ = [
    "STRATA",
    "Candidate",
    "ChunkText",
    "Delivered",
    "ImportResult",
    "Screened",
    "allocate",
    "import_labels",
    "screen",
    "select_for_labelling",
    "stratum",
    "write_labelling_file",
]
