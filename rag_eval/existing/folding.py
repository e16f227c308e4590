"""A text folded for comparing (case folded, whitespace runs as one space) with the way back to its own
characters, and every occurrence of a text in another: what :mod:`rag_eval.existing.locate` compares rows and
documents with.
"""

from __future__ import annotations

import re

MAX_OCCURRENCES = 10_000  # occurrences of one text in one document looked at
_NON_SPACE = re.compile(r"\S+")


class Folded:
    """A text case-folded with every whitespace run as one space, and the original index of each character.

    >>> f = Folded("A  Bß\\n c")
    >>> (f.text, f.original(0, len(f.text)))
    ('a bss c', (0, 8))
    """

    __slots__ = ("_index", "stored", "text")

    def __init__(self, text: str) -> None:
        self.stored = text
        folded = text.casefold()
        if len(folded) == len(text):  # no character folds into several: one index per character, runs in C
            parts, index = self._runs(folded)
        else:
            parts, index = self._chars(text)
        self.text = "".join(parts)
        self._index = index
        self._index.append(len(text) if not index else index[-1] + 1)

    @staticmethod
    def _runs(folded: str) -> tuple[list[str], list[int]]:
        parts: list[str] = []
        index: list[int] = []
        previous = 0
        for match in _NON_SPACE.finditer(folded):
            start, end = match.span()
            if parts:  # the run of whitespace before it: one space, at its first character
                parts.append(" ")
                index.append(previous)
            parts.append(folded[start:end])
            index.extend(range(start, end))
            previous = end
        return parts, index

    @staticmethod
    def _chars(text: str) -> tuple[list[str], list[int]]:
        chars: list[str] = []
        index: list[int] = []
        space = False
        for i, ch in enumerate(text):
            if ch.isspace():
                if not space and chars:
                    chars.append(" ")
                    index.append(i)
                space = True
                continue
            space = False
            for folded in ch.casefold():
                chars.append(folded)
                index.append(i)
        if chars and chars[-1] == " ":
            chars.pop()
            index.pop()
        return chars, index

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original range of folded characters ``[start, end)`` (end exclusive, past the last one)."""
        return self._index[start], self._index[end - 1] + 1 if end > start else self._index[start]


def fold(text: str) -> str:
    return Folded(text).text


def occurrences(haystack: str, needle: str, limit: int = MAX_OCCURRENCES) -> list[int]:
    """Start of every occurrence of ``needle`` in ``haystack`` (overlapping ones too), in order.

    >>> occurrences("abab ab", "ab")
    [0, 2, 5]
    """
    found: list[int] = []
    at = haystack.find(needle)
    while at >= 0 and len(found) < limit:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found
