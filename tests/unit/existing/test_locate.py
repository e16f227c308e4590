"""Locating a stored row's text in its source document: worked examples and a property judged by the chunker."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.datasets.chunking import CharWindowChunker, SentenceWindowChunker
from rag_eval.existing.locate import How, StoredRow, locate_rows, occurrences

DOCS = {
    "lag": "Replica lag.\nCheck the SQL thread. Restart it. Check the SQL thread. Done.",
    "logs": "Rotate the logs weekly. Keep 30 days of logs.",
}


def where(rows: list[StoredRow], docs: dict[str, str] = DOCS, **kw: float) -> list[tuple[str | None, int, int, str]]:
    return [(loc.doc_id, loc.start, loc.end, loc.how.value) for loc in locate_rows(docs, rows, **kw)]


def test_a_repeated_sentence_gives_its_occurrences_to_its_rows_in_chunk_order() -> None:
    text = "Check the SQL thread."
    first, second = occurrences(DOCS["lag"], text)
    rows = [
        StoredRow(pk="9", doc_id="lag", text=text, chunk_index=3),
        StoredRow(pk="4", doc_id="lag", text=text, chunk_index=1),
    ]
    assert where(rows) == [("lag", second, second + len(text), "exact"), ("lag", first, first + len(text), "exact")]


def test_without_chunk_index_the_primary_key_orders_them_numerically() -> None:
    text = "Check the SQL thread."
    first, second = occurrences(DOCS["lag"], text)
    rows = [StoredRow(pk="10", doc_id="lag", text=text), StoredRow(pk="9", doc_id="lag", text=text)]
    assert [s for _, s, _, _ in where(rows)] == [second, first]


def test_a_re_ingested_copy_lands_on_the_chunk_it_copies() -> None:
    rows = [StoredRow(pk=str(i), doc_id="logs", text="Keep 30 days of logs.") for i in (1, 2, 3)]
    start = DOCS["logs"].index("Keep")
    assert {(s, e) for _, s, e, _ in where(rows)} == {(start, len(DOCS["logs"]))}


def test_stored_offsets_are_used_when_they_hold_the_text_and_ignored_when_not() -> None:
    start = DOCS["lag"].index("Restart")
    good = StoredRow(pk="1", doc_id="lag", text="Restart it.", start=start, end=start + 11)
    bad = StoredRow(pk="2", doc_id="lag", text="Restart it.", start=0, end=11)
    out = locate_rows(DOCS, [good, bad])
    assert [(loc.how, loc.start, loc.offsets_disagreed) for loc in out] == [
        (How.OFFSETS, start, False),
        (How.EXACT, start, True),
    ]


def test_offsets_past_the_document_disagree() -> None:
    row = StoredRow(pk="1", doc_id="logs", text="Rotate the logs weekly.", start=5, end=10_000)
    (loc,) = locate_rows(DOCS, [row])
    assert (loc.how, loc.start, loc.offsets_disagreed) == (How.EXACT, 0, True)


def test_rows_without_a_doc_id_or_under_the_wrong_one_are_found_across_the_corpus() -> None:
    rows = [
        StoredRow(pk="1", doc_id=None, text="Keep 30 days of logs."),
        StoredRow(pk="2", doc_id="lag", text="Rotate the logs weekly."),
        StoredRow(pk="3", doc_id="gone", text="Restart it."),
    ]
    out = locate_rows(DOCS, rows)
    assert [(loc.doc_id, loc.moved) for loc in out] == [("logs", False), ("logs", True), ("lag", True)]


def test_case_and_whitespace_are_folded_and_mapped_back_to_the_original_range() -> None:
    row = StoredRow(pk="1", doc_id="lag", text="replica LAG. check   the sql thread.")
    (got,) = where([row])
    assert got == ("lag", 0, DOCS["lag"].index(" Restart"), "normalised")


def test_a_header_or_a_typo_is_found_fuzzily_and_garbage_is_not() -> None:
    text = "Rotate the logs weekly. Keep 30 days of logs."
    rows = [
        StoredRow(pk="1", doc_id="logs", text="Rotate teh logs weekly. Keep 30 days of logs."),
        StoredRow(pk="2", doc_id="logs", text="Zebra quantum fjord, nothing here at all."),
    ]
    out = locate_rows(DOCS, rows)
    assert (out[0].how, out[0].doc_id, out[0].start, out[0].end) == (How.FUZZY, "logs", 0, len(text))
    assert 90 <= out[0].score < 100
    assert out[1].how is How.UNRESOLVED and (out[1].doc_id, out[1].start) == (None, -1)


def test_the_threshold_decides_a_fuzzy_match() -> None:
    row = StoredRow(pk="1", doc_id="logs", text="Rotate teh logs weekly.")
    assert where([row], fuzzy_threshold=99.0)[0][3] == "unresolved"
    assert where([row], fuzzy_threshold=80.0)[0][3] == "fuzzy"


def test_blank_text_is_unresolved() -> None:
    assert where([StoredRow(pk="1", doc_id="lag", text="  \n")])[0][3] == "unresolved"


_VOCAB = ("lag replica restart the SQL thread logs rotate keep days error timeout lock wait innodb buffer pool "
          "disk full primary failover vacuum index bloat connection pool exhausted query plan").split()
_sentence = st.lists(st.sampled_from(_VOCAB), min_size=3, max_size=9, unique=True).map(
    lambda w: " ".join(w).capitalize() + "."
)
# documents of sentences drawn from a small pool: whole sentences repeat within and across documents, never
# twice in a row (a text of one sentence over and over has no place a window could be told apart by)
_docs = st.lists(_sentence, min_size=2, max_size=6, unique=True).flatmap(
    lambda pool: st.lists(
        st.lists(st.sampled_from(pool), min_size=1, max_size=14).map(
            lambda seq: [x for n, x in enumerate(seq) if n == 0 or x != seq[n - 1]]
        ),
        min_size=1,
        max_size=4,
    )
)


@settings(max_examples=150, deadline=None)
@given(
    docs=_docs,
    size=st.integers(12, 80),
    overlap_tenths=st.integers(0, 2),
    sentences=st.booleans(),
    drop_doc=st.sets(st.integers(0, 200)),
    mangle=st.sets(st.integers(0, 200)),
)
def test_a_chunkers_rows_are_located_where_the_chunker_cut_them(
    docs: list[list[str]], size: int, overlap_tenths: int, sentences: bool, drop_doc: set[int], mangle: set[int]
) -> None:
    """Whatever the chunker (windows overlapping by up to a fifth, as text splitters are set; repeated
    sentences), rows written with their chunk index are located at text equal to theirs (case and
    whitespace folded), with or without doc ids; in a document whose rows all carry its doc id, at exactly
    the chunker's own ranges, with case and whitespace mangled."""
    texts = {f"d{i}": " ".join(sentences) for i, sentences in enumerate(docs)}
    chunker = SentenceWindowChunker(size=1 + size % 3, overlap=0) if sentences else CharWindowChunker(
        size=size, overlap=size * overlap_tenths // 10
    )
    rows, expected = [], []
    for doc_id, text in texts.items():
        for c in chunker.split(doc_id, text):
            n = len(rows)
            content = c.content.upper().replace(" ", "  ") if n in mangle else c.content
            rows.append(StoredRow(pk=str(n), doc_id=None if n in drop_doc else doc_id, text=content,
                                  chunk_index=c.chunk_index))  # fmt: skip
            expected.append((doc_id, c.start, c.end))
    got = locate_rows(texts, rows)
    partial = {doc_id for (doc_id, _, _), row in zip(expected, rows, strict=True) if row.doc_id is None}
    for loc, (doc_id, start, end) in zip(got, expected, strict=True):
        assert loc.resolved
        assert loc.doc_id is not None
        assert texts[loc.doc_id][loc.start : loc.end].casefold().split() == texts[doc_id][start:end].casefold().split()
        if doc_id not in partial:  # every row of its document says which document it is from: exactly there
            assert (loc.doc_id, loc.start, loc.end) == (doc_id, start, end)


# -- rows changed by an ingest (worked examples; tests/unit/existing/test_changed_texts.py draws them at random) --

NOISY = {
    "ops": "Keep the disk under 80 percent. Schedule drain cluster connection days naïve! Rotate the logs weekly.",
    "other": "Schedule the backup nightly. Drain the node before the upgrade. Check the cluster health.",
}


def test_a_short_row_with_a_changed_word_in_every_four_gram_is_found_through_word_pairs() -> None:
    """No word 4-gram of the row is in any document ('c0nnection' is in all three): without a doc id it was left
    unresolved though its passage aligns at 97.8."""
    row = StoredRow(pk="1", doc_id=None, text="Schedule drain cluster c0nnection days naïve!")
    (loc,) = locate_rows(NOISY, [row])
    passage = "Schedule drain cluster connection days naïve!"
    start = NOISY["ops"].index(passage)
    assert (loc.doc_id, loc.how, loc.start, loc.end) == ("ops", How.FUZZY, start, start + len(passage))
    assert 97 < loc.score < 98


def test_a_row_decomposed_to_nfd_is_located_exactly_once_composed() -> None:
    """Its stored form was aligned fuzzily first (a window of the decomposed row's length, and How.FUZZY); the
    composed form is the document's text, exactly."""
    docs = {"fr": "The café opens at eight. The résumé of the meeting is sent to the team every evening at six. End."}
    passage = "The résumé of the meeting is sent to the team every evening at six."
    start = docs["fr"].index(passage)
    for doc_id in (None, "fr"):
        row = StoredRow(pk="1", doc_id=doc_id, text=unicodedata.normalize("NFD", passage))
        (loc,) = locate_rows(docs, [row])
        assert (loc.doc_id, loc.how, loc.start, loc.end, loc.score) == (
            "fr",
            How.EXACT,
            start,
            start + len(passage),
            100.0,
        )


def test_a_row_whose_markup_was_cleaned_away_is_placed_on_its_whole_passage() -> None:
    """The alignment's window is as long as the row, four characters shorter than the passage it came from: the
    window cut the passage's end. It is moved onto the row's first and last matched characters."""
    passage = "Restart the **replica** now, then check the replication lag and the disk usage on every node again."
    docs = {"ops": f"Keep the lag low. {passage} Rotate the logs weekly.", "other": "Rotate the logs weekly."}
    start = docs["ops"].index(passage)
    for doc_id in (None, "ops"):
        (loc,) = locate_rows(docs, [StoredRow(pk="1", doc_id=doc_id, text=passage.replace("*", ""))])
        assert (loc.doc_id, loc.how, loc.start, loc.end) == ("ops", How.FUZZY, start, start + len(passage))


def test_a_noisy_row_keeps_the_window_that_is_its_passage() -> None:
    """A row with characters changed, not lost, is as long as its passage: the window is already the passage. Its
    first and last runs of matching characters would start two characters in (the alignment pairs the row's
    'node node node' differently); the window is kept, since the row is not more like that text."""
    passage = "Node node node days weekly? Check naïve restart über pool cluster disk logs rotate?"
    docs = {"ops": f"Retry the connection? {passage} Keep the logs.", "other": "Rotate the logs weekly."}
    start = docs["ops"].index(passage)
    (loc,) = locate_rows(docs, [StoredRow(pk="1", doc_id="ops", text=passage.replace("pool", "p0ol"))])
    assert (loc.doc_id, loc.how, loc.start, loc.end) == ("ops", How.FUZZY, start, start + len(passage))
