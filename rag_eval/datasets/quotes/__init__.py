"""Build a BEIR data set with span qrels from markdown documents and quoted evidence.

Sources live in one directory::

    SRC/docs/**/<doc_id>.md     +++ TOML front matter +++, then the markdown body
    SRC/queries/*.toml          [[query]] tables whose [[query.evidence]] quote the documents

A document's ``text`` is its body with surrounding whitespace stripped. Every
evidence quote must occur exactly once in the text of the document it names;
its position becomes a span ``(start, end)`` (0-based, end exclusive). The
build writes, into ``OUT``::

    corpus.jsonl  queries.jsonl  qrels/<split>.tsv  qrels/<split>.spans.tsv

Every problem found is reported at once, in one :class:`DatasetError` naming
the source file, the 1-based line and the field of the first problem. Outputs
are written to a temporary directory first and moved into place only when the
whole build succeeded, so a failing build leaves the previous output as it was.

An authoring tool (``make dataset`` builds the shipped data set with it), not a step of a run; one job
a module: :mod:`~rag_eval.datasets.quotes.problems` (how a problem is named and raised),
:mod:`~rag_eval.datasets.quotes.documents` (the documents and their front matter),
:mod:`~rag_eval.datasets.quotes.queries` (the query files and their evidence),
:mod:`~rag_eval.datasets.quotes.build` (the spans, the output files, the command line).

Command line::

    python -m rag_eval.datasets.quotes SRC_DIR OUT_DIR [--split test]
"""

from rag_eval.datasets.quotes.build import BuildReport, build_dataset, main
from rag_eval.datasets.quotes.documents import MAX_BODY_CHARS, MIN_BODY_CHARS

__all__ = ["MAX_BODY_CHARS", "MIN_BODY_CHARS", "BuildReport", "build_dataset", "main"]
