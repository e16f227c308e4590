"""How many examples a Hypothesis property test draws.

``make test`` draws the full count written in each test. ``make mutate`` runs every selected test
once per mutant, thousands of times, so there (``RAG_EVAL_MUTATION=1``, set by
``tests/mutation/run.py``) a property test draws an eighth of it, never fewer than 25 (or the full
count when that is smaller). The examples are still fixed (the ``mutation`` profile derandomizes), so
a mutant's verdict does not depend on chance; the worked examples run unchanged.
"""

from __future__ import annotations

import os

MUTATION = os.environ.get("RAG_EVAL_MUTATION") == "1"


def examples(n: int) -> int:
    """``n`` under ``make test``; an eighth of it (at least ``min(n, 25)``) under ``make mutate``."""
    return max(min(n, 25), n // 8) if MUTATION else n
