"""A baseline from another experiment (another name, or another production cap: the cap the legacy configs are
checked against) is never paired silently: ``compare``, ``run --against`` and ``nightly`` refuse it with exit 2
and one line saying so, before anything runs, unless ``--other-experiment`` (then the comparison's notes say
so); ``accept`` refuses to replace the accepted baseline of another experiment whose name makes the same
folder, unless ``--force``. (Another data set is refused as before: ``data set checksum``.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_eval import jobs
from rag_eval.cli import main
from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import load_gates
from rag_eval.compare.history import accepted_dir
from rag_eval.compare.runs import ComparedRun, check_same_experiment, experiment_identity
from rag_eval.core.errors import RunDirectoryError
from tests.conftest import SHIPPED
from tests.unit.runs import config, make_run, pair_rows

GATES = load_gates("nightly")
NIGHTLY = SHIPPED / "experiments" / "nightly.toml"


def legacy_and_evidence(*, cap: int, source: str = "experiment.production_cap") -> list[dict[str, Any]]:
    return [{**config("legacy", pipeline="legacy", cap=cap), "cap_source": source},
            {**config("evidence", cap=2), "cap_source": "config"}]  # fmt: skip


def a_run(directory: Path | None, *, experiment: str = "kb", cap: int = 2) -> ComparedRun:
    rows = pair_rows(40, "legacy") + pair_rows(40, "evidence")
    return make_run(rows, legacy_and_evidence(cap=cap), baseline="legacy", experiment=experiment, directory=directory)


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_the_identity_is_the_name_and_the_cap_the_legacy_configs_are_checked_against() -> None:
    assert experiment_identity("kb", legacy_and_evidence(cap=3)) == {"experiment": "kb", "production cap": 3}
    assert experiment_identity("kb", [config("evidence")]) == {"experiment": "kb", "production cap": None}
    assert a_run(None).experiment_identity() == {"experiment": "kb", "production cap": 2}


@pytest.mark.parametrize(
    ("other", "said"),
    [({"experiment": "kb-other"}, "experiment: 'kb' vs 'kb-other'"), ({"cap": 3}, "production cap: 2 vs 3")],
)
def test_compare_refuses_a_baseline_of_another_experiment_unless_told(
    tmp_path: Path, other: dict[str, Any], said: str
) -> None:
    run, baseline = a_run(tmp_path / "run"), a_run(tmp_path / "baseline", **other)
    with pytest.raises(RunDirectoryError) as err:
        jobs.compare_runs(run.dir or "", jobs.Judging(against=baseline.dir))
    assert said in str(err.value) and "another experiment" in str(err.value) and "--other-experiment" in str(err.value)
    forced = jobs.compare_runs(run.dir or "", jobs.Judging(against=baseline.dir, other_experiment=True))
    notes = forced.document["notes"]
    assert any(n.startswith("paired with a run of another experiment") and said in n for n in notes), notes
    assert compare(run, a_run(None), GATES).exit_code == 0  # the same experiment pairs as before
    assert check_same_experiment(run.experiment_identity(), a_run(None)) == []


def test_a_baseline_without_legacy_configs_has_no_cap_to_differ() -> None:
    rows = pair_rows(40, "legacy") + pair_rows(40, "evidence")
    evidence_only = make_run(rows, [config("legacy"), config("evidence")], baseline="legacy", experiment="kb")
    assert check_same_experiment(a_run(None, cap=3).experiment_identity(), evidence_only) == []


def test_the_compare_command_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, other = a_run(tmp_path / "run"), a_run(tmp_path / "other", experiment="kb-other")
    assert main(["compare", str(run.dir), "--against", str(other.dir), "-q"]) == 2
    line = one_line(capsys)
    assert str(other.dir) in line and "another experiment" in line
    assert not list((tmp_path / "run").glob("compare-vs-*"))
    assert main(["compare", str(run.dir), "--against", str(other.dir), "--other-experiment", "-q"]) == 0
    written = json.loads(next((tmp_path / "run").glob("compare-vs-*.json")).read_text())
    assert any("another experiment" in n for n in written["notes"])


@pytest.mark.parametrize(("name", "cap", "said"), [
    ("synthetic", 2, "experiment: 'incident-kb-nightly' vs 'synthetic'"),
    ("incident-kb-nightly", 3, "production cap: 2 vs 3"),
])  # fmt: skip
def test_run_and_nightly_refuse_it_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, cap: int, said: str
) -> None:
    accepted = tmp_path / "acc"
    baseline = a_run(accepted_dir(accepted, "incident-kb-nightly"), experiment=name, cap=cap)
    db = tmp_path / "kb.db"
    code = main(["run", str(NIGHTLY), "--against", str(baseline.dir), "--out", str(tmp_path / "run"),
                 "--milvus-uri", str(db), "-q"])  # fmt: skip
    line = one_line(capsys)
    assert code == 2 and said in line and "--other-experiment" in line, line
    assert not (tmp_path / "run").exists() and not db.exists()
    code = main(["nightly", str(NIGHTLY), "--root", str(tmp_path / "nights"), "--accepted-dir", str(accepted),
                 "--history", str(tmp_path / "history.parquet"), "--milvus-uri", str(db), "-q"])  # fmt: skip
    line = one_line(capsys)
    assert code == 2 and said in line, line
    assert not (tmp_path / "nights").exists() and not (tmp_path / "history.parquet").exists() and not db.exists()


def test_accept_never_replaces_another_experiments_baseline_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = a_run(tmp_path / "mine", experiment="kb-nightly")
    theirs = a_run(tmp_path / "theirs", experiment="kb-nightly_")
    root = tmp_path / "acc"
    assert accepted_dir(root, mine.experiment) == accepted_dir(root, theirs.experiment)  # one folder name
    assert main(["accept", str(mine.dir), "--accepted-dir", str(root)]) == 0
    capsys.readouterr()
    assert main(["accept", str(theirs.dir), "--accepted-dir", str(root)]) == 2
    line = one_line(capsys)
    assert "another experiment, 'kb-nightly'" in line and "--force" in line, line
    assert ComparedRun.from_dir(accepted_dir(root, mine.experiment)).experiment == "kb-nightly"
    assert main(["accept", str(theirs.dir), "--accepted-dir", str(root), "--force"]) == 0
    assert ComparedRun.from_dir(accepted_dir(root, mine.experiment)).experiment == "kb-nightly_"
    assert main(["accept", str(theirs.dir), "--accepted-dir", str(root)]) == 0  # its own experiment again
