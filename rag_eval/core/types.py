"""Domain types of the pipeline (D6 and the L2 DTOs): small, immutable, named.

Flow: ``KnowledgeSearchRequest`` -> port -> ``KnowledgeSearchHit`` ->
``RetrievedEvidenceCandidate`` (+ identity) -> post-process -> ``EvidenceBlock``.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from rag_eval.core.identity import key_of, keys_of

MetadataValue = str | int | float | bool | None
T = TypeVar("T")


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """A positional constructor for a frozen, slotted dataclass that writes its slots directly.

    A frozen dataclass's ``__init__`` parses keywords and sets every field through
    ``object.__setattr__``, and its own ``__setattr__`` (which refuses every write) keeps the
    interpreter from writing a slot directly. The object is therefore made as an instance of a
    twin class with the same slots and no ``__setattr__`` of its own, written with plain
    attribute stores (the interpreter's specialised slot writes), and then given its class
    (``__class__`` assignment, allowed between classes of one layout): about 0.5 µs for
    eight fields, against 0.8 µs writing each slot through its descriptor and 2 µs for the
    dataclass's ``__init__``. The function is generated, as dataclasses generates
    ``__init__``; it takes every field, in declaration order, and is refused for classes with
    a ``__post_init__`` (it would be skipped).

    >>> make = fast_constructor(MemberSpan)
    >>> made = make("d#chunk-0", 0, 12)
    >>> made == MemberSpan(key="d#chunk-0", start=0, end=12), type(made) is MemberSpan
    (True, True)
    """
    if hasattr(cls, "__post_init__") or "__slots__" not in vars(cls):
        raise TypeError(f"{cls.__name__} has a __post_init__ or no slots: use its own constructor")
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    slots = tuple(vars(cls)["__slots__"])
    if cls.__bases__ != (object,) or sorted(slots) != sorted(names) or {"obj", "new", "twin", "cls"} & set(names):
        raise TypeError(f"{cls.__name__}: a base class, slots not its fields, or a field named obj/new/twin/cls")
    return slots_constructor(cls, names)


def slots_constructor(cls: type[T], names: Sequence[str]) -> Callable[..., T]:
    """:func:`fast_constructor` for a slotted class that is not a dataclass (its bases slotted and empty, as
    ``collections.abc.Sequence``): the maker takes ``names``, which must be its slots, in that order. It
    skips the class's ``__init__``: for classes whose ``__init__`` only stores its arguments."""
    slots = tuple(vars(cls)["__slots__"])
    if sorted(slots) != sorted(names) or {"obj", "new", "twin", "cls"} & set(names):
        raise TypeError(f"{cls.__name__}: slots not {list(names)}, or a slot named obj/new/twin/cls")
    # the bases' abstract methods, stubbed: the twin is never used as one of them
    abstract = dict.fromkeys(name for base in cls.__mro__[1:] for name in getattr(base, "__abstractmethods__", ()))
    meta: Any = type(cls)  # type, or the ABC's metaclass
    twin = meta(f"_{cls.__name__}Twin", cls.__bases__, {"__slots__": slots, **abstract})
    namespace: dict[str, Any] = {"new": object.__new__, "twin": twin, "cls": cls}
    lines = [f"def make({', '.join(names)}):", "    obj = new(twin)"]
    lines += [f"    obj.{n} = {n}" for n in names]
    lines += ["    obj.__class__ = cls", "    return obj"]
    exec("\n".join(lines), namespace)
    maker: Callable[..., T] = namespace["make"]
    maker.__name__ = maker.__qualname__ = f"new_{cls.__name__}"
    return maker


class SearchMode(enum.StrEnum):
    """How the port searches. ``DENSE`` is the design's only mode; the others are
    offered by adapters whose backend really supports them and refused elsewhere."""

    DENSE = "dense"
    GROUPED = "grouped"  # server-side per-document grouping (Milvus group_by_field)
    HYBRID = "hybrid"  # BM25 full text + dense, fused with RRF


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeSearchRequest:
    """What the pipeline asks of the port (D6): query text, width, optional category filter.

    ``group_size`` is read only in ``GROUPED`` mode (hits per document).
    """

    query: str
    top_k: int
    category_filter: str | None = None
    mode: SearchMode = SearchMode.DENSE
    group_size: int = 1

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeSearchHit:
    """One hit as the port returns it (D6): id, content, score fields, metadata and the
    identity fields extracted when the row has them (None when missing)."""

    id: str
    content: str
    score: float
    scores: Mapping[str, float] = field(default_factory=dict)
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    doc_id: str | None = None
    chunk_index: int | None = None
    vector_id: str | None = None
    source: str | None = None
    title: str | None = None
    category: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HitReason:
    """Why a candidate is in the list: which channel found it, at which original rank."""

    channel: str
    original_rank: int
    score: float
    vector_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievedEvidenceCandidate:
    """A hit with its identity (D1). ``original_rank`` is 1-based in the port's order."""

    key: str
    hit: KnowledgeSearchHit
    original_rank: int
    hit_reasons: tuple[HitReason, ...]

    @property
    def score(self) -> float:
        return self.hit.score

    @property
    def doc_id(self) -> str | None:
        return self.hit.doc_id

    @classmethod
    def from_hit(
        cls, hit: KnowledgeSearchHit, original_rank: int, channel: str = "dense"
    ) -> RetrievedEvidenceCandidate:
        key = key_of(hit.doc_id, hit.chunk_index, hit.vector_id, original_rank)
        return _candidate(key, hit, original_rank, channel)


_new_reason = fast_constructor(HitReason)
_new_candidate = fast_constructor(RetrievedEvidenceCandidate)


def _candidate(key: str, hit: KnowledgeSearchHit, original_rank: int, channel: str) -> RetrievedEvidenceCandidate:
    reason = _new_reason(channel, original_rank, hit.score, hit.vector_id)
    return _new_candidate(key, hit, original_rank, (reason,))


class Candidates(Sequence[RetrievedEvidenceCandidate]):
    """One lookup's candidates, kept as columns (evidence keys, hits, original ranks); a
    :class:`RetrievedEvidenceCandidate` is made only when it is asked for, then kept.

    Post-processing reads the columns and asks for objects only for what it selects, so the
    candidates a lookup drops cost a key and a place in a sort, not an object and a hit
    reason each. Otherwise it is an immutable sequence of candidates, equal to another one
    (or to a tuple) holding equal candidates.

    >>> hit = KnowledgeSearchHit(id="7", content="x", score=0.5, doc_id="d", chunk_index=0, vector_id="7")
    >>> cands = Candidates.from_hits([hit])
    >>> cands.keys, cands[0].hit_reasons[0].original_rank
    (('d#chunk-0',), 1)
    """

    __slots__ = ("_objects", "channel", "hits", "keys", "ranks")

    keys: tuple[str, ...]
    hits: tuple[KnowledgeSearchHit, ...]
    ranks: Sequence[int]
    channel: str
    _objects: list[RetrievedEvidenceCandidate | None]

    def __init__(
        self,
        keys: tuple[str, ...],
        hits: tuple[KnowledgeSearchHit, ...],
        ranks: Sequence[int],
        objects: list[RetrievedEvidenceCandidate | None],
        channel: str = "dense",
    ) -> None:
        """Prefer :meth:`from_hits` and :meth:`of`; the four sequences are parallel."""
        setattr_ = object.__setattr__
        setattr_(self, "keys", keys)
        setattr_(self, "hits", hits)
        setattr_(self, "ranks", ranks)
        setattr_(self, "_objects", objects)
        setattr_(self, "channel", channel)

    @classmethod
    def from_hits(cls, hits: Sequence[KnowledgeSearchHit], channel: str = "dense") -> Candidates:
        """The port's hits, in the order returned, with their D1 keys (ranks from 1)."""
        hits = tuple(hits)
        make = _new_candidates if cls is Candidates else cls  # a subclass: its own constructor
        return make(keys_of(hits), hits, range(1, len(hits) + 1), [None] * len(hits), channel)

    @classmethod
    def of(cls, candidates: Iterable[RetrievedEvidenceCandidate]) -> Candidates:
        """Candidate objects as columns (``candidates`` itself when it already is a Candidates)."""
        if isinstance(candidates, Candidates):
            return candidates
        made = list(candidates)
        objects: list[RetrievedEvidenceCandidate | None] = list(made)
        return cls(tuple([c.key for c in made]), tuple([c.hit for c in made]), [c.original_rank for c in made], objects)

    def take(self, indices: Iterable[int]) -> list[RetrievedEvidenceCandidate]:
        """The candidates at ``indices`` (non-negative), made where not made yet."""
        return [self.get(i) for i in indices]

    def get(self, index: int) -> RetrievedEvidenceCandidate:
        """The candidate at ``index`` (non-negative), made if not made yet."""
        obj = self._objects[index]
        if obj is None:  # _candidate written out (a call less for every candidate selected)
            hit, rank = self.hits[index], self.ranks[index]
            reason = _new_reason(self.channel, rank, hit.score, hit.vector_id)
            obj = self._objects[index] = _new_candidate(self.keys[index], hit, rank, (reason,))
        return obj

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, index: int) -> RetrievedEvidenceCandidate: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RetrievedEvidenceCandidate, ...]: ...

    def __getitem__(self, index: int | slice) -> RetrievedEvidenceCandidate | tuple[RetrievedEvidenceCandidate, ...]:
        if isinstance(index, slice):
            return tuple(self.take(range(len(self))[index]))
        return self.get(range(len(self))[index])

    def __iter__(self) -> Iterator[RetrievedEvidenceCandidate]:
        return iter(self.take(range(len(self))))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Candidates | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Candidates({tuple(self)!r})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


class Deferred(Sequence[T]):
    """A tuple built the first time it is read, then kept; equal to it, hashing and pickling as it.

    For values a production lookup does not read and that can be large: the members and hit
    reasons of 10,000 copies of one chunk would otherwise cost 20,000 objects per lookup.

    >>> d = Deferred(lambda: (1, 2))
    >>> d == (1, 2), len(d), d[-1], hash(d) == hash((1, 2))
    (True, 2, 2, True)
    """

    __slots__ = ("_build", "_value")

    _build: Callable[[], Iterable[T]] | None
    _value: tuple[T, ...] | None

    def __init__(self, build: Callable[[], Iterable[T]]) -> None:
        object.__setattr__(self, "_build", build)
        object.__setattr__(self, "_value", None)

    @property
    def value(self) -> tuple[T, ...]:
        """The tuple itself (built now if not yet)."""
        value = self._value
        if value is None:
            assert self._build is not None
            value = tuple(self._build())
            object.__setattr__(self, "_value", value)
            object.__setattr__(self, "_build", None)  # let go of what it was built from
        return value

    def __len__(self) -> int:
        return len(self.value)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        return self.value[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self.value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Deferred):
            return self.value == other.value
        if isinstance(other, tuple):
            return self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self.value,))

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


_new_candidates = slots_constructor(Candidates, ("keys", "hits", "ranks", "_objects", "channel"))
_new_deferred = slots_constructor(Deferred, ("_build", "_value"))


def deferred(build: Callable[[], Iterable[T]]) -> Deferred[T]:
    """``Deferred(build)``, made without its ``__init__`` (a lookup makes two or more)."""
    return _new_deferred(build, None)


def to_candidates(hits: Sequence[KnowledgeSearchHit], channel: str = "dense") -> tuple[RetrievedEvidenceCandidate, ...]:
    """Map the port's hits, in the order returned, to candidates (ranks from 1)."""
    return tuple(Candidates.from_hits(hits, channel))


_INT_DIGITS = sys.get_int_max_str_digits() or sys.maxsize  # the most digits int() converts (0: no limit)


def hit_order(hit: KnowledgeSearchHit) -> tuple[bool, float, int, int, str]:
    """The total order adapters return hits in: score descending (NaN last, after minus infinity,
    as post-processing orders them), then the row's id
    ascending (numerically when it is a decimal integer, those first), so that hits with equal
    scores come in the same order on every backend and every run.

    >>> hits = [KnowledgeSearchHit(id=i, content="", score=s) for i, s in (("10", 0.5), ("9", 0.5), ("x", 0.9))]
    >>> [h.id for h in sorted(hits, key=hit_order)]
    ['x', '9', '10']
    """
    ident = hit.vector_id or hit.id
    numeric = ident.isascii() and ident.isdigit() and len(ident) <= _INT_DIGITS  # longer: not int()'s, a text
    score = hit.score
    nan = score != score
    return (nan, 0.0 if nan else -score, 0 if numeric else 1, int(ident) if numeric else 0, ident)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberSpan:
    """Where one constituent candidate's content sits inside a block's content."""

    key: str
    start: int
    end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceBlock:
    """One packed evidence block (L1 fact evidence).

    ``key`` is the block's identity: the evidence key in the evidence pipeline, the
    document identity (source) in the legacy one. ``members`` are the candidates the
    block carries: one key for an evidence block (true duplicates merged), several
    chunks for a legacy document block.
    """

    key: str
    position: int
    content: str
    score: float
    doc_id: str | None
    source: str | None
    title: str | None
    category: str | None
    hit_reasons: Sequence[HitReason]  # a tuple, or a Deferred one (many copies of one chunk)
    members: tuple[MemberSpan, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
