"""Where a stored row's text sits in its source document: the labels of a collection someone else built.

Such a collection holds rows that are not our chunks, but span labels are character ranges in the source
documents, so a row becomes labelled once its text is found in a document: it is then relevant to a query when
its range overlaps one of the query's spans (:mod:`rag_eval.datasets.labels`), whatever chunker wrote it. A
row is located by its stored offsets, exactly, normalised or fuzzily, in its own document first, then across
the corpus; the order and the tie rules: docs/existing-collection.md, "How the labels are resolved".

>>> docs = {"a": "Check the lag. Restart the replica.", "b": "Rotate the logs."}
>>> rows = [StoredRow(pk="1", doc_id="a", text="Restart the replica."),
...         StoredRow(pk="2", doc_id=None, text="rotate  THE logs."),
...         StoredRow(pk="3", doc_id="a", text="Nothing like it.")]
>>> [(l.pk, l.doc_id, l.start, l.end, l.how.value) for l in locate_rows(docs, rows)]
[('1', 'a', 15, 35, 'exact'), ('2', 'b', 0, 16, 'normalised'), ('3', None, -1, -1, 'unresolved')]
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rag_eval.datasets.placement import How, Match, StoredRow, placed_elsewhere
from rag_eval.datasets.placement import placed as placed_in_documents
from rag_eval.existing.folding import Folded, fold, occurrences
from rag_eval.experiment.model import DEFAULT_FUZZY_THRESHOLD

__all__ = ["DEFAULT_FUZZY_THRESHOLD", "Folded", "How", "Location", "StoredRow", "fold", "locate_rows", "occurrences"]

SEGMENT_EDGES = frozenset("|]>:-—–#(")  # the characters that end a title or source line, or start a trailer
ADDED_TEXT_RATIO = 70.0  # what a row has beyond a passage of its document reads like the text beside it: noise
FUZZY_CANDIDATES = 3  # documents aligned per row when it is searched across the corpus
_SEP = "\x00"  # between documents in the corpus-wide index: no row's text spans two documents
_WORD = re.compile(r"\w+")
_SHINGLE = 4
_FALLBACK_SHINGLE = 2  # word pairs, for a row whose every 4-gram has a changed word


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """Where a row's text was found: ``doc_id`` and ``[start, end)`` in that document's text, or
    ``how == UNRESOLVED`` (``doc_id`` None, offsets -1). ``score`` is 100 unless ``how`` is fuzzy."""

    pk: str
    stored_doc_id: str | None
    doc_id: str | None
    start: int
    end: int
    how: How
    score: float
    offsets_disagreed: bool = False  # the row's stored offsets named other text
    ambiguous: bool = False  # not in its stored document (or none) and its text is in several places

    @property
    def resolved(self) -> bool:
        return self.how is not How.UNRESOLVED

    @property
    def moved(self) -> bool:
        """Found in another document than the one its stored doc id names."""
        return self.resolved and self.stored_doc_id is not None and self.doc_id != self.stored_doc_id


class _Corpus:
    """The documents, their folded forms and a word 4-gram index, each built once, when first needed."""

    def __init__(self, documents: Mapping[str, str]) -> None:
        self.documents = documents
        self._folded: dict[str, Folded] = {}
        self._joined: tuple[str, list[int], list[str]] | None = None
        self._joined_folded: tuple[str, list[int], list[str]] | None = None
        self._shingles: dict[int, dict[tuple[str, ...], set[str]]] = {}  # by words a shingle
        self._order: dict[str, int] | None = None

    def folded(self, doc_id: str) -> Folded:
        known = self._folded.get(doc_id)
        if known is None:
            known = self._folded[doc_id] = Folded(self.documents[doc_id])
        return known

    def joined(self, folded: bool) -> tuple[str, list[int], list[str]]:
        """Every document's text (or folded text) in one string, separated, with each one's start."""
        cached = self._joined_folded if folded else self._joined
        if cached is None:
            ids = list(self.documents)
            texts = [self.folded(d).text if folded else self.documents[d] for d in ids]
            starts, at = [], 0
            for t in texts:
                starts.append(at)
                at += len(t) + 1
            cached = (_SEP.join(texts), starts, ids)
            if folded:
                self._joined_folded = cached
            else:
                self._joined = cached
        return cached

    def shingle_index(self, size: int = _SHINGLE) -> dict[tuple[str, ...], set[str]]:
        """Word ``size``-gram of a folded document -> the documents that have it (built once, when first asked)."""
        index = self._shingles.get(size)
        if index is None:
            made: dict[tuple[str, ...], set[str]] = defaultdict(set)
            for doc_id in self.documents:
                for shingle in set(_shingles(self.folded(doc_id).text, size)):
                    made[shingle].add(doc_id)
            index = self._shingles[size] = dict(made)
        return index

    def candidates(self, folded_text: str) -> list[str]:
        """The documents sharing the most word 4-grams with ``folded_text`` (at most FUZZY_CANDIDATES); when it
        shares none with any (a short row with a changed word in every 4-gram of it: 'schedule drain cluster
        c0nnection days'), those sharing the most word pairs."""
        for size in (_SHINGLE, _FALLBACK_SHINGLE):
            index = self.shingle_index(size)
            votes: Counter[str] = Counter()
            for shingle in set(_shingles(folded_text, size)):
                votes.update(index.get(shingle, ()))
            if votes:
                return [d for d, _ in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[:FUZZY_CANDIDATES]]
        return []

    def holding(self, folded_text: str) -> list[str] | None:
        """The documents that can hold ``folded_text`` (as it is or folded), in corpus order: those with its
        rarest word 4-gram between its first and last word (which may be cut words). None when the text has
        too few words to say: every document then."""
        words = _WORD.findall(folded_text)[1:-1]
        if len(words) < _SHINGLE:
            return None
        index = self.shingle_index()
        shingles = set(zip(*(words[i:] for i in range(_SHINGLE)), strict=False))
        rarest = min(shingles, key=lambda sh: len(index.get(sh, ())))
        found = index.get(rarest, set())
        if self._order is None:
            self._order = {d: n for n, d in enumerate(self.documents)}
        return sorted(found, key=self._order.__getitem__)


def _shingles(text: str, size: int = _SHINGLE) -> Iterable[tuple[str, ...]]:
    words = _WORD.findall(text)
    return zip(*(words[i:] for i in range(size)), strict=False)  # word n-grams, made in C


def _in_document(corpus: _Corpus, doc_id: str, text: str, threshold: float | None) -> Match | None:
    """The row's text in one document: exactly, folded, or (``threshold`` given) fuzzily."""
    doc = corpus.documents[doc_id]
    found = occurrences(doc, text)
    if found:
        return Match(doc_id, [(s, s + len(text)) for s in found], How.EXACT)
    folded = corpus.folded(doc_id)
    row = Folded(text)
    needle = row.text
    if not needle:
        return None
    found = occurrences(folded.text, needle)
    if found:
        return Match(doc_id, [folded.original(s, s + len(needle)) for s in found], How.NORMALISED)
    return _fuzzy(folded, doc_id, row, threshold) if threshold is not None else None


def _forms(text: str) -> list[str]:
    """A row's text as stored, then composed (NFC) and compatibility-composed (NFKC) where those differ: an
    ingest that normalised Unicode stored another form of the document's characters. None when blank.

    >>> [len(t) for t in _forms("cafe\u0301")], _forms("  ")
    ([5, 4], [])
    """
    if not text.strip():
        return []
    return list(dict.fromkeys((text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFKC", text))))


def _fuzzy(folded: Folded, doc_id: str, row: Folded, threshold: float) -> Match | None:
    """The row (folded) in one document (folded): a passage with added text, exactly, else the best fuzzy
    alignment at or above ``threshold``."""
    from rapidfuzz.fuzz import partial_ratio_alignment

    if not folded.text:
        return None
    needle = row.text
    added = _without_added_text(folded.text, row, 0)  # a passage with a title or source line: exact
    if added is not None:
        start, end = added
        return Match(doc_id, [folded.original(start, end)], How.FUZZY, round(100.0 * (end - start) / len(needle), 2))
    got = partial_ratio_alignment(needle, folded.text, score_cutoff=threshold)
    if got is None:
        return None
    # the alignment's source is the row, its destination the document, whichever is the longer
    start, end = _matched_ends(needle, folded.text, got.dest_start, got.dest_end)
    if end <= start:
        return None
    return Match(doc_id, [folded.original(start, end)], How.FUZZY, float(got.score))


_ANCHOR = 3  # characters in a row an alignment's first and last matches need to mark where the passage is


def _matched_ends(needle: str, text: str, start: int, end: int) -> tuple[int, int]:
    """The window ``text[start:end]`` that the partial alignment found (as long as the row) moved to where the row's
    first and last matched characters are: a passage of the document that the row has lost characters of (cleaned
    markup) is longer than the row, and the window's fixed length cut one of its ends. The row is aligned against
    the window widened by what the fuzzy threshold lets it lose, and the first and last runs of at least
    :data:`_ANCHOR` equal characters give the ends, when the row is more like the text between them than like the
    window (the window as it is otherwise).

    >>> text = "Keep the lag low. Restart the **replica** now and check. Rotate logs."
    >>> needle = "restart the replica now and check."
    >>> text[slice(*_matched_ends(needle, text.lower(), 22, 22 + len(needle)))]
    'Restart the **replica** now and check.'
    """
    from rapidfuzz.distance import Indel

    if end - start < len(needle):  # the row is longer than the document: the window is the document's whole text
        return start, end
    margin = len(needle) // 10 + _ANCHOR
    low, high = max(0, start - margin), min(len(text), end + margin)
    ops = Indel.opcodes(needle, text[low:high])
    equal = [op for op in ops if op.tag == "equal" and op.src_end - op.src_start >= _ANCHOR]
    if not equal:
        return start, end
    moved = low + equal[0].dest_start, low + equal[-1].dest_end
    # taken only when the row is more like it than like the window (a noisy row's window is its passage already,
    # and a run of a few characters beside it, 'the', may also match)
    alike = Indel.normalized_similarity
    return moved if alike(needle, text[moved[0] : moved[1]]) > alike(needle, text[start:end]) else (start, end)


def _without_added_text(text: str, row: Folded, near: int) -> tuple[int, int] | None:
    """Where a row that is a passage of ``text`` with text added before or after it (a title or source line
    an ingest stored with the chunk) sits exactly: the longest end of the row that occurs in ``text``, when
    it is at least half the row (the occurrence nearest ``near``), and what was cut is a line or segment of
    its own in the row as stored (a line break, or a separator such as ``|`` or ``]``, between it and the
    passage) that does not read like the document beside it; None otherwise (a row with noise in it: the
    fuzzy alignment's window stands). ``text`` and ``row`` are folded.

    >>> doc = "Intro. Restart the SQL thread, then check the lag. Done."
    >>> doc = fold(doc)
    >>> start, end = _without_added_text(doc, Folded("Runbook 7 | Restart the SQL thread, then check the lag."), 0)
    >>> doc[start:end]
    'restart the sql thread, then check the lag.'
    >>> _without_added_text(doc, Folded("Restart the SQL thraed, then check the lag."), 0) is None
    True
    """
    from rapidfuzz.fuzz import ratio

    needle = row.text
    best: tuple[int, str, bool] | None = None  # (characters cut, the part that occurs, cut from the head)
    for head in (True, False):
        cut = _shortest_cut(text, needle, head=head)
        if cut is not None and (best is None or cut[0] < best[0]):
            best = (*cut, head)
    if best is None:
        return None
    k, part, head = best
    k, part = _at_a_word_edge(needle, k, head=head)  # what the added text shares with the document's next word
    places = occurrences(text, part)
    at = min(places, key=lambda p: abs(p - near)) if places else text.find(part)
    start, end = at, at + len(part)
    removed = needle[:k] if head else needle[len(needle) - k :]
    beside = text[max(0, start - k) : start] if head else text[end : end + k]
    if ratio(removed, beside) >= ADDED_TEXT_RATIO or not _a_segment_of_its_own(row, k, head=head):
        return None  # the row's own text, changed: noise, not added text
    # the added text may begin (or end) with characters the document has beside the passage: a passage starts
    # and ends between words, so a part of a word the match reached into is the added text's, not the row's
    if head and 0 < start < end and text[start - 1].isalnum() and text[start].isalnum():
        while start < end and text[start].isalnum():
            start += 1
    if not head and start < end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
        while end > start and text[end - 1].isalnum():
            end -= 1
    while start < end and text[start] == " ":  # a separator the added text shared with the document
        start += 1
    while end > start and text[end - 1] == " ":
        end -= 1
    return start, end


def _at_a_word_edge(needle: str, k: int, *, head: bool) -> tuple[int, str]:
    """The cut of ``k`` characters moved to the edge of the word it falls in (more is cut), and what is left.

    >>> _at_a_word_edge("abc tags: x", 5, head=False)
    (7, 'abc ')
    """
    at = k if head else len(needle) - k
    step = 1 if head else -1
    while 0 < at < len(needle) and needle[at - 1].isalnum() and needle[at].isalnum():
        at += step
    return (at, needle[at:]) if head else (len(needle) - at, needle[:at])


def _a_segment_of_its_own(row: Folded, k: int, *, head: bool) -> bool:
    """True when the first (``head``) or last ``k`` folded characters of the row are a line or segment of their
    own in the row as stored: a line break, or a separator (``|``, ``]``, ``:``, ``-``, ...) at their edge."""
    original = row.stored
    if head:
        _, cut = row.original(0, k)
        added = original[:cut]
        edge = added.rstrip()[-1:]
        return "\n" in added[-3:] or "\n" in original[cut : cut + 1] or edge in SEGMENT_EDGES
    size = len(row.text)
    cut, _ = row.original(size - k, size)
    added = original[cut:]
    edge = added.lstrip()[:1]
    return "\n" in added[:3] or "\n" in original[cut - 1 : cut] or edge in SEGMENT_EDGES


def _shortest_cut(text: str, needle: str, *, head: bool) -> tuple[int, str] | None:
    """The fewest characters cut from the row's head (or tail) that leave a part ``text`` holds, and that
    part; None past half the row. A part of a part that occurs occurs too, so the fewest is found by halving."""

    def part(k: int) -> str:
        return needle[k:] if head else needle[: len(needle) - k]

    low, high = 1, len(needle) // 2
    if high < low or part(high) not in text:
        return None
    while low < high:
        middle = (low + high) // 2
        if part(middle) in text:
            high = middle
        else:
            low = middle + 1
    return low, part(low)


def _across_corpus(corpus: _Corpus, text: str, threshold: float | None) -> list[Match]:
    """Every document (in corpus order) holding the text exactly, else every one holding it folded, else
    (``threshold`` given) the best fuzzy one (of the few the word 4-grams point to); empty when none does."""
    row = Folded(text)
    needle = row.text
    if not needle:
        return []
    possible = corpus.holding(needle)
    for folded in (False, True):
        wanted = needle if folded else text
        if possible is None:  # a few words only: every document is searched, all at once
            joined, starts, ids = corpus.joined(folded)
            docs = list(dict.fromkeys(ids[bisect_right(starts, at) - 1] for at in occurrences(joined, wanted)))
        else:
            docs = [d for d in possible if wanted in (corpus.folded(d).text if folded else corpus.documents[d])]
        matches = [m for m in (_in_document(corpus, d, text, 100.0) for d in docs) if m is not None]
        if matches:
            return matches
    if threshold is None:
        return []
    best: Match | None = None
    for doc_id in corpus.candidates(needle):
        match = _fuzzy(corpus.folded(doc_id), doc_id, row, threshold)
        if match is not None and (best is None or match.score > best.score):
            best = match
    return [best] if best is not None else []


def _by_offsets(corpus: _Corpus, row: StoredRow) -> tuple[bool, bool]:
    """(the stored offsets locate the row, the row had offsets that named other text)."""
    if row.doc_id is None or row.doc_id not in corpus.documents or row.start is None or row.end is None:
        return False, False
    doc = corpus.documents[row.doc_id]
    if not 0 <= row.start < row.end <= len(doc):
        return False, True
    there = doc[row.start : row.end]
    ok = there == row.text or fold(there) == fold(row.text)
    return ok, not ok


def _search(corpus: _Corpus, row: StoredRow, threshold: float) -> tuple[Match | None, list[Match]]:
    """The row in the document its doc id names, else across the corpus; in each, its text as stored and in the
    Unicode forms a document is written in (:func:`_forms`) exactly or folded before any of them fuzzily (a row
    an ingest decomposed to NFD is its document's text once composed: exact, not a fuzzy window)."""
    forms = _forms(row.text)
    if row.doc_id is not None and row.doc_id in corpus.documents:
        for fuzzy in (None, threshold):
            for text in forms:
                match = _in_document(corpus, row.doc_id, text, fuzzy)
                if match is not None:
                    return match, []
    for fuzzy in (None, threshold):
        for text in forms:
            matches = _across_corpus(corpus, text, fuzzy)
            if matches:
                return None, matches
    return None, []


def locate_rows(
    documents: Mapping[str, str], rows: Sequence[StoredRow], *, fuzzy_threshold: float = DEFAULT_FUZZY_THRESHOLD
) -> list[Location]:
    """Where each row's text sits (see the module's docstring for the order of attempts), in row order."""
    if not 0.0 < fuzzy_threshold <= 100.0:
        raise ValueError("fuzzy_threshold must be in (0, 100]")
    corpus = _Corpus(documents)
    located: dict[int, Location] = {}
    found: dict[int, Match] = {}  # rows found in the document their doc id names
    elsewhere: dict[int, list[Match]] = {}  # rows without a doc id, or not in their stored document
    disagreed: set[int] = set()
    for i, row in enumerate(rows):
        by_offsets, bad_offsets = _by_offsets(corpus, row)
        if bad_offsets:
            disagreed.add(i)
        if by_offsets:
            assert row.doc_id is not None and row.start is not None and row.end is not None
            found[i] = Match(row.doc_id, [(row.start, row.end)], How.OFFSETS)
            continue
        match, matches = _search(corpus, row, fuzzy_threshold)
        if match is not None:
            found[i] = match
        elif matches:
            elsewhere[i] = matches
        else:
            located[i] = Location(pk=row.pk, stored_doc_id=row.doc_id, doc_id=None, start=-1, end=-1,
                                  how=How.UNRESOLVED, score=0.0, offsets_disagreed=i in disagreed)  # fmt: skip
    # a row outside its stored document whose text is in one place only is placed first: it is known
    unique = {i: ms[0] for i, ms in elsewhere.items() if len(ms) == 1 and len(ms[0].ranges) == 1}
    placed = placed_in_documents(rows, found, known=[(m.doc_id, m.ranges[0]) for m in unique.values()])
    for i, match in unique.items():
        found[i], placed[i] = match, match.ranges[0]
    guessed = {i: ms for i, ms in elsewhere.items() if i not in unique}
    for i, (match, where) in placed_elsewhere(rows, guessed, found, placed).items():
        found[i], placed[i] = match, where
    for i, (start, end) in placed.items():
        row, match = rows[i], found[i]
        located[i] = Location(pk=row.pk, stored_doc_id=row.doc_id, doc_id=match.doc_id, start=start, end=end,
                              how=match.how, score=match.score, offsets_disagreed=i in disagreed,
                              ambiguous=i in guessed)  # fmt: skip
    return [located[i] for i in range(len(rows))]
