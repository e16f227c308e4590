"""The ``document`` chunker keeps a document whole; every chunker keeps ``text[start:end] == content``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.core.errors import ConfigError
from rag_eval.datasets.chunking import DocumentChunker, parse_chunker


@given(st.text(max_size=300))
def test_a_document_is_one_chunk_its_text_without_surrounding_whitespace(text: str) -> None:
    chunks = parse_chunker("document").split("d", text, title="T")
    if not text.strip():
        assert chunks == []  # a blank document has nothing to embed or deliver
        return
    (chunk,) = chunks
    assert chunk.content == text.strip() and text[chunk.start : chunk.end] == chunk.content
    assert (chunk.key, chunk.title) == ("d#chunk-0", "T")


def test_the_spec_reads_back_and_takes_no_parameter() -> None:
    assert parse_chunker(" document ").spec == "document" == DocumentChunker().spec
    for spec in ("document:size=3", "document:x"):
        with pytest.raises(ConfigError, match="keeps each document whole"):
            parse_chunker(spec)
    with pytest.raises(ConfigError, match="sentences, chars, document"):
        parse_chunker("paragraphs")
