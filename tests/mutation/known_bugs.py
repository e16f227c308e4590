"""Plausible one-line bugs in the measures, each with the tests that must fail on it.

Each bug is applied to a throw-away copy of the repository (never to the working tree), the named tests
run there, and the bug counts as caught only when they fail; the unmodified copy must pass them first.
A bug whose line is no longer in the source is reported as stale: rewrite it against the new code.

    python -m tests.mutation.known_bugs          # every bug
    python -m tests.mutation.known_bugs 3 8      # some of them
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPY = ("rag_eval", "tests", "pyproject.toml")


@dataclass(frozen=True)
class Bug:
    number: int
    what: str
    path: str
    line: str  # the correct line, exactly once in the file
    buggy: str
    tests: tuple[str, ...]


PROJ = "tests/unit/core/test_projector_edges.py::"
LOSS = "tests/unit/rundir/test_loss_stages.py::"
MEAS = "tests/unit/metrics/test_measure_definitions.py::"
ORAC = "tests/unit/metrics/test_oracles.py::"

BUGS = (
    Bug(
        1,
        "an excerpt delivered whole is reported truncated",
        "rag_eval/core/projector.py",
        "kept < full,  # truncated",
        "kept <= full,  # truncated",
        (
            PROJ + "test_whole_excerpts_are_not_truncated",
            PROJ + "test_an_excerpt_exactly_at_the_excerpt_budget_is_whole",
        ),
    ),
    Bug(
        2,
        "a budget ending exactly at a member's end reports that member lost",
        "rag_eval/core/projector.py",
        "if m.end > limit and m.key not in lost:",
        "if m.end >= limit and m.key not in lost:",
        (
            PROJ + "test_legacy_budget_ending_exactly_at_a_member_end_delivers_it_and_loses_only_the_next",
            PROJ + "test_legacy_total_budget_ending_exactly_at_a_member_end",
        ),
    ),
    Bug(
        3,
        "a chunk hit twice under different keys takes its loss stage from the worse-ranked copy",
        "rag_eval/rundir/rows.py",
        "if chunk not in out or entry.original_rank < out[chunk][0]:",
        "if chunk not in out or entry.original_rank > out[chunk][0]:",
        (
            LOSS + "test_a_chunk_capped_under_its_key_and_cut_as_a_docless_copy_is_lost_to_the_cap",
            LOSS + "test_when_the_docless_copy_ranks_better_its_return_n_cut_names_the_stage",
        ),
    ),
    Bug(
        4,
        "the content hash stops folding case",
        "rag_eval/content.py",
        'return " ".join(text.lower().split())',
        'return " ".join(text.split())',
        (
            MEAS + "test_content_hash_folds_case_and_whitespace_only",
            MEAS + "test_duplicate_rates_of_the_evidence_pipeline",
        ),
    ),
    Bug(
        5,
        "the cap-aware recall divides by the cap, not min(cap, relevant chunks)",
        "rag_eval/metrics/perquery.py",
        "denom = np.where(np.isnan(row_cap), size, np.minimum(row_cap, size))",
        "denom = np.where(np.isnan(row_cap), size, row_cap)",
        (
            MEAS + "test_cap_aware_recall_divides_by_the_smaller_of_cap_and_relevant_chunks",
            ORAC + "test_per_query_measures_match_their_definitions",
        ),
    ),
    Bug(
        6,
        "rag.pipeline=legacy without rag.top-k gets widths 20/20",
        "rag_eval/core/config.py",
        "width = top_k if top_k is not None else DEFAULT_RETURN_N",
        "width = top_k if top_k is not None else DEFAULT_RETRIEVE_K",
        (MEAS + "test_legacy_without_top_k_uses_five_for_both_widths",),
    ),
    Bug(
        7,
        "the document ranking keeps unknown: chunks",
        "rag_eval/metrics/perquery.py",
        "code[_np(pc.starts_with(chunk_vocab, UNKNOWN_PREFIX))] = -1",
        "code[_np(pc.starts_with(chunk_vocab, UNKNOWN_PREFIX))] += 0",
        (MEAS + "test_an_unknown_chunk_is_a_non_relevant_chunk_and_no_document",),
    ),
    Bug(
        8,
        "with port order unlike score order a dedup entry names the loss stage",
        "rag_eval/rundir/rows.py",
        "continue  # its key's primary is a copy of the same chunk and carries the fate",
        "pass  # its key's primary is a copy of the same chunk and carries the fate",
        (LOSS + "test_port_order_unlike_score_order_a_dedup_copy_does_not_name_the_stage",),
    ),
    Bug(
        9,
        "NaN scores sort first",
        "rag_eval/core/postprocess.py",
        "(True, 0.0, r, k) if (s := h.score) != s else (False, -s, r, k)",
        "(False, 0.0, r, k) if (s := h.score) != s else (True, -s, r, k)",
        (
            ORAC + "test_post_processor_matches_the_reference",
            ORAC + "test_nan_comes_after_minus_infinity_whatever_the_port_order",
        ),
    ),
    Bug(
        10,
        "NaN scores tie with minus infinity (NaN before -inf when the port ranks it first)",
        "rag_eval/core/postprocess.py",
        "(True, 0.0, r, k) if (s := h.score) != s else (False, -s, r, k)",
        "(False, float('inf'), r, k) if (s := h.score) != s else (False, -s, r, k)",
        (ORAC + "test_nan_comes_after_minus_infinity_whatever_the_port_order",),
    ),
)


def pytest_in(tree: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "--no-header", *tests]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)


def check(bug: Bug, work: Path) -> str:
    tree = work / f"bug{bug.number}"
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tree / name, ignore=shutil.ignore_patterns("__pycache__", "mutants"))
        else:
            shutil.copy2(src, tree / name)
    target = tree / bug.path
    text = target.read_text()
    if text.count(bug.line) != 1:
        return f"STALE   bug {bug.number}: the line is no longer in {bug.path}: {bug.line!r}"
    if pytest_in(tree, bug.tests).returncode != 0:
        return f"BROKEN  bug {bug.number}: its tests fail without the bug"
    target.write_text(text.replace(bug.line, bug.buggy))
    proc = pytest_in(tree, bug.tests)
    failed = {
        ln.split(" - ")[0].removeprefix("FAILED ").split("[")[0]
        for ln in proc.stdout.splitlines()
        if ln.startswith("FAILED")
    }
    passed = [t for t in bug.tests if t not in failed]
    if proc.returncode == 1 and not passed:
        return f"caught  bug {bug.number} ({bug.what}) by {', '.join(t.split('::')[-1] for t in bug.tests)}"
    return f"MISSED  bug {bug.number} ({bug.what}): passes {', '.join(passed)} (pytest exit {proc.returncode})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", type=int)
    args = parser.parse_args(argv)
    chosen = [b for b in BUGS if not args.numbers or b.number in args.numbers]
    with tempfile.TemporaryDirectory(prefix="rag-eval-bugs-") as tmp:
        verdicts = [check(bug, Path(tmp)) for bug in chosen]
    print("\n".join(verdicts))
    return 0 if all(v.startswith("caught") for v in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
