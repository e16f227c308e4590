"""Folding a text for comparing (case folded, whitespace runs as one space) and the way back to its characters;
every occurrence of a text in another. Worked examples, and properties judged by ``str`` itself."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.existing.folding import Folded, fold, occurrences


def test_folding_keeps_an_index_into_the_original_text() -> None:
    f = Folded("  Straße \t ÉTÉ  ")
    assert f.text == "strasse été"
    start = f.text.index("été")
    assert f.original(start, start + 3) == (11, 14)
    assert f.original(4, 6) == (6, 7)  # 'ss' is the one character 'ß' at 6
    assert fold("") == "" and fold(" \n\t ") == ""


def test_occurrences_overlap_and_stop_at_the_limit() -> None:
    assert occurrences("aaaa", "aa") == [0, 1, 2]
    assert occurrences("abab ab", "ab", limit=2) == [0, 2]
    assert occurrences("abc", "x") == []


TEXTS = st.text(st.sampled_from("aAbB ßİΣς\t\n\u00a0é\u0301.,"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_the_folded_text_is_the_case_folded_words_joined_by_one_space(text: str) -> None:
    f = Folded(text)
    assert f.text == " ".join(text.casefold().split())
    for i, ch in enumerate(f.text):  # each folded character comes from an original one that folds to it
        start, end = f.original(i, i + 1)
        assert end == start + 1
        assert (ch == " " and text[start].isspace()) or ch in text[start].casefold()


@settings(max_examples=300, deadline=None)
@given(haystack=st.text("ab ", max_size=30), needle=st.text("ab ", min_size=1, max_size=4))
def test_occurrences_are_every_start_of_the_needle(haystack: str, needle: str) -> None:
    assert occurrences(haystack, needle) == [i for i in range(len(haystack)) if haystack.startswith(needle, i)]
