"""Build a BEIR data set with span qrels from markdown documents and quoted evidence.

An authoring tool (``make dataset`` builds the shipped data set with it), not a step of a run: evidence is
written as exact quotes, so a span's offsets are found, never typed. The source layout, the checks and the
output: docs/harness.md, "Data sets". Command line::

    python -m rag_eval.datasets.quotes SRC_DIR OUT_DIR [--split test]
"""

from rag_eval.datasets.quotes.build import BuildReport, build_dataset, main
from rag_eval.datasets.quotes.documents import MAX_BODY_CHARS, MIN_BODY_CHARS

__all__ = ["MAX_BODY_CHARS", "MIN_BODY_CHARS", "BuildReport", "build_dataset", "main"]
