"""``make mutate``: mutation testing of the modules that compute what the harness reports.

Steps: the known one-line bugs (``known_bugs.py``) must each be caught; then mutmut mutates
``rag_eval/core``, ``rag_eval/metrics`` and ``rag_eval/rundir/rows.py`` (``[tool.mutmut]`` in
pyproject.toml) from scratch and runs the fast tests against every mutant; then every mutant that no
test killed must be listed in ``equivalent.toml`` with the reason no test can tell it from the code.

Exit 0 when all holds; 1 when a known bug is missed, a survivor is not listed, a listed entry is stale
(no such survivor any more) or the score is under 90%; 3 when the tools themselves fail (the fast tests
fail on the unmutated code, mutmut crashes). The score table is printed and written to
``mutants/score.md``; stubs for unlisted survivors go to ``mutants/unlisted.toml``.

    python -m tests.mutation.run                # everything, from scratch
    python -m tests.mutation.run --report-only  # judge the results already in mutants/
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EQUIVALENT = HERE / "equivalent.toml"
MUTANTS = ROOT / "mutants"
TARGET = 0.90

# mutmut's exit codes per mutant (mutmut/stats.py); a timeout means the mutant changed behaviour
KILLED = {1, 3, 36, 24, -24, 152, 255, 37}
SURVIVED = {0}
NO_TESTS = {5, 33}


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's name, e.g. rag_eval.core.postprocess.xǁSelectedEvidenceǁas_candidate__mutmut_3
    path: str  # rag_eval/core/postprocess.py
    exit_code: int | None

    @property
    def status(self) -> str:
        if self.exit_code in KILLED:
            return "killed"
        if self.exit_code in SURVIVED:
            return "survived"
        if self.exit_code in NO_TESTS:
            return "no tests"
        return "not checked" if self.exit_code is None else f"suspicious ({self.exit_code})"

    @property
    def where(self) -> str:
        """Module and qualified function name, e.g. rag_eval.core.postprocess.SelectedEvidence.as_candidate."""
        module, _, func = self.name.rsplit("__mutmut_", 1)[0].rpartition(".")
        func = func.removeprefix("x_") if func.startswith("x_") else func.removeprefix("x")
        return f"{module}.{'.'.join(p for p in func.split('ǁ') if p)}"


def load_mutants() -> list[Mutant]:
    out = []
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        path = str(meta.relative_to(MUTANTS)).removesuffix(".meta")
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        out.extend(Mutant(name=k, path=path, exit_code=v) for k, v in codes.items())
    return out


def change_of(mutant: Mutant) -> str:
    """The mutated lines as ``removed => added``, stripped: the key that survives renumbering."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant  # only after mutmut has run

    diff = get_diff_for_mutant(mutant.name, path=mutant.path).splitlines()
    removed = [ln[1:].strip() for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:].strip() for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    return f"{' '.join(removed)} => {' '.join(added)}"


def keyed(mutants: list[Mutant]) -> dict[tuple[str, str], Mutant]:
    """Survivors keyed by (function, change); the same change twice in a function gets ``#2``..."""
    seen: Counter[tuple[str, str]] = Counter()
    out = {}
    for m in sorted(mutants, key=lambda m: (m.where, int(m.name.rsplit("_", 1)[1]))):
        key = (m.where, change_of(m))
        seen[key] += 1
        if seen[key] > 1:
            key = (key[0], f"{key[1]} #{seen[key]}")
        out[key] = m
    return out


def load_equivalent() -> dict[tuple[str, str], str]:
    entries = tomllib.loads(EQUIVALENT.read_text()).get("mutant", [])
    return {(e["where"], e["change"]): e["why"] for e in entries}


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def package_of(path: str) -> str:
    return "rag_eval/rundir/rows.py" if path.startswith("rag_eval/rundir") else str(Path(path).parent)


def score_table(mutants: list[Mutant], equivalent_names: set[str], seconds: float | None) -> str:
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    for m in mutants:
        status = "equivalent" if m.name in equivalent_names else m.status.split(" ")[0]
        for group in (m.path, package_of(m.path) + " (all)", "total"):
            rows[group][status] += 1
            rows[group]["mutants"] += 1
    lines = [
        "| module | mutants | killed | equivalent | survived | no tests | killed / mutants | killed / non-equivalent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = sorted(k for k in rows if k != "total" and not k.endswith("(all)"))
    groups = sorted({package_of(k) for k in order})
    for group in groups:
        for k in [*(k for k in order if package_of(k) == group), f"{group} (all)"]:
            if k.endswith("(all)") and sum(1 for o in order if package_of(o) == group) == 1:
                continue
            lines.append(_row(k, rows[k]))
    lines.append(_row("total", rows["total"]))
    if seconds is not None:
        lines.append(f"\nmutmut run: {seconds / 60:.1f} min wall on {os.cpu_count()} cores")
    return "\n".join(lines)


def _row(name: str, c: Counter[str]) -> str:
    live = c["mutants"] - c["equivalent"]
    return (
        f"| {name} | {c['mutants']} | {c['killed']} | {c['equivalent']} | {c['survived']} | {c['no']} | "
        f"{c['killed'] / c['mutants']:.1%} | {c['killed'] / live if live else 1:.1%} |"
    )


def judge(seconds: float | None) -> int:
    mutants = load_mutants()
    if not mutants:
        print("no mutmut results in mutants/: run without --report-only", file=sys.stderr)
        return 3
    not_killed = [m for m in mutants if m.status != "killed"]
    survivors = keyed(not_killed)
    listed = load_equivalent()
    unlisted = {k: m for k, m in survivors.items() if k not in listed}
    stale = [k for k in listed if k not in survivors]
    equivalent_names = {m.name for k, m in survivors.items() if k in listed}
    table = score_table(mutants, equivalent_names, seconds)
    (MUTANTS / "score.md").write_text(table + "\n")
    print(table)
    total = len(mutants)
    killed = sum(1 for m in mutants if m.status == "killed")
    failed = False
    if unlisted:
        failed = True
        stubs = "\n".join(
            f'[[mutant]]\nwhere = {toml_string(w)}\nchange = {toml_string(c)}\nwhy = ""  # {m.status}: {m.name}\n'
            for (w, c), m in unlisted.items()
        )
        (MUTANTS / "unlisted.toml").write_text(stubs)
        print(f"\n{len(unlisted)} mutants not killed and not listed in {EQUIVALENT.relative_to(ROOT)}:")
        for (w, c), m in unlisted.items():
            print(f"  {m.status:9} {w}: {c}\n            mutmut show {m.name}")
        print("kill each with a test, or list it with the reason it is equivalent (stubs: mutants/unlisted.toml)")
    if stale:
        failed = True
        print(f"\n{len(stale)} stale entries in {EQUIVALENT.relative_to(ROOT)} (no such surviving mutant any more):")
        for w, c in stale:
            print(f"  {w}: {c}")
    if killed / total < TARGET:
        failed = True
        print(f"\nmutation score {killed / total:.1%} is under the {TARGET:.0%} target")
    return 1 if failed else 0


def run_mutmut() -> tuple[int, float]:
    shutil.rmtree(MUTANTS, ignore_errors=True)  # from scratch: no verdict carried over from other code
    # RAG_EVAL_MUTATION: property tests draw fewer (still fixed) examples per mutant (tests/budget.py)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAG_EVAL_MUTATION": "1"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.mutation.guarded_mutmut", "run"],  # mutmut run, its timeouts guarded
        cwd=ROOT,
        env=env,
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = time.monotonic() - start
    tail = re.sub(r"[^\n]*\r", "", proc.stdout)[-3000:]  # drop the spinner's redrawn lines
    print(tail)
    return proc.returncode, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-only", action="store_true", help="judge the results already in mutants/")
    parser.add_argument("--skip-known-bugs", action="store_true", help="do not re-check the known bugs")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    status = 0
    if not args.report_only and not args.skip_known_bugs:
        from tests.mutation import known_bugs

        status = known_bugs.main([])
    seconds = None
    if not args.report_only:
        code, seconds = run_mutmut()
        if code != 0:
            print(f"mutmut failed (exit {code}): see the output above", file=sys.stderr)
            return 3
    verdict = judge(seconds)
    return max(status, verdict)


if __name__ == "__main__":
    raise SystemExit(main())
