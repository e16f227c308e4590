"""``rag-eval nightly``: run against the accepted baseline (a first night accepts itself) -> append the
history."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from rag_eval.compare.gates import GateSet
from rag_eval.compare.history import accept, accepted_dir, append_history, check_history, is_accepted, night_notes
from rag_eval.compare.runs import ComparedRun
from rag_eval.experiment import Experiment
from rag_eval.jobs.compare import Judging
from rag_eval.jobs.run import RunResult, run_experiment
from rag_eval.replay.step import Execution
from rag_eval.rundir import folders


@dataclass(frozen=True, slots=True, kw_only=True)
class NightResult:
    """Where the night went, the accepted baseline it paired with (``first``: itself), and its run."""

    dir: Path
    accepted: Path
    first: bool
    run: RunResult

    @property
    def exit_code(self) -> int:
        return self.run.exit_code


@dataclass(frozen=True, slots=True, kw_only=True)
class NightFolders:
    """Where the nights go, where the accepted baselines are kept, and the history file."""

    root: str | Path = folders.NIGHTS
    accepted_root: str | Path = folders.ACCEPTED
    history: str | Path = folders.HISTORY


def nightly(
    exp: Experiment,
    places: NightFolders | None = None,
    *,
    gates: GateSet | None = None,
    how: Execution | None = None,
    when: dt.datetime | None = None,
    other_experiment: bool = False,
) -> NightResult:
    """One night: run ``exp`` into ``ROOT/<experiment>/<UTC date>/`` (its name written to
    ``ROOT/<experiment>/LATEST``), pair it with the accepted baseline (the first night accepts itself and says
    so), apply the gates, append to the history. An accepted baseline of another experiment (another name
    under the same folder, another production cap) is refused before the first query unless
    ``other_experiment``."""
    places = places or NightFolders()
    check_history(places.history)  # a night that could not be recorded is refused before its first query
    accepted = accepted_dir(places.accepted_root, exp.name)
    out = folders.night_dir(Path(places.root) / accepted.name, when)  # nights numbered per experiment
    first = not is_accepted(accepted)
    judged = Judging(
        gates=gates,
        against=None if first else accepted,
        against_self=first,
        notes=night_notes(accepted, first=first),
        other_experiment=other_experiment,
    )
    result = run_experiment(exp, out, how, judged)
    folders.mark_latest(out)  # a night that was run, whatever its gates said
    if first:
        accept(out, root=places.accepted_root, force=True)  # the first night is the baseline, whatever it found
    append_history(ComparedRun.from_dir(out), exit_code=result.exit_code, path=places.history)
    return NightResult(dir=out, accepted=accepted, first=first, run=result)
