"""Where runs go when no directory is given: a stamped directory per run, a dated one per night (the
second night of a date numbered)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from rag_eval.rundir.folders import (
    ACCEPTED,
    HISTORY,
    LATEST,
    LOAD,
    NIGHTS,
    RUNS,
    STAMP,
    mark_latest,
    night_dir,
    stamped_dir,
)

WHEN = dt.datetime(2026, 12, 31, 23, 59, 7, tzinfo=dt.UTC)


def test_the_default_places() -> None:
    shown = [p.as_posix() for p in (RUNS, LOAD, NIGHTS, ACCEPTED, HISTORY)]
    assert shown == ["reports/runs", "reports/load", "reports/nightly", "reports/accepted", "reports/history.parquet"]
    assert WHEN.strftime(STAMP) == "20261231T235907Z"


def test_a_stamped_directory_is_the_name_and_the_utc_time() -> None:
    assert stamped_dir(RUNS, "incident-kb", WHEN) == Path("reports/runs/incident-kb-20261231T235907Z")
    assert stamped_dir("/tmp/load/", "x", WHEN) == Path("/tmp/load/x-20261231T235907Z")
    assert stamped_dir(LOAD, "a-b", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)).name == "a-b-20260102T030405Z"


def test_a_stamped_directory_without_a_time_is_stamped_now() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    path = stamped_dir(RUNS, "exp")
    after = dt.datetime.now(dt.UTC)
    match = re.fullmatch(r"exp-(\d{8}T\d{6}Z)", path.name)
    assert match is not None and path.parent == RUNS
    stamped = dt.datetime.strptime(match.group(1), STAMP).replace(tzinfo=dt.UTC)
    assert before <= stamped <= after


def test_a_night_is_its_date_and_a_second_night_on_that_date_is_numbered(tmp_path: Path) -> None:
    root = tmp_path / "nightly"
    assert night_dir(root, WHEN) == root / "2026-12-31"
    (root / "2026-12-31").mkdir(parents=True)
    assert night_dir(root, WHEN) == root / "2026-12-31.2"
    (root / "2026-12-31.2").write_text("")  # a file takes the name too
    assert night_dir(str(root), WHEN) == root / "2026-12-31.3"
    (root / "2026-12-31.4").mkdir()  # a gap is filled first
    assert night_dir(root, WHEN) == root / "2026-12-31.3"
    assert night_dir(root, WHEN + dt.timedelta(seconds=53)) == root / "2027-01-01"


def test_latest_names_the_last_night_of_its_experiment_only(tmp_path: Path) -> None:
    root = tmp_path / "nightly"
    first = night_dir(root / "kb-nightly", WHEN)
    first.mkdir(parents=True)
    assert mark_latest(first).read_text() == "2026-12-31\n"
    second = night_dir(root / "kb-nightly", WHEN)
    assert second.name == "2026-12-31.2"
    assert mark_latest(second).read_text() == "2026-12-31.2\n"  # replaced, not appended
    other = night_dir(root / "clapnq-nightly", WHEN)  # numbered per experiment
    assert other == root / "clapnq-nightly" / "2026-12-31"
    mark_latest(other)
    assert (root / "kb-nightly" / LATEST).read_text() == "2026-12-31.2\n"
    assert sorted(p.name for p in (root / "kb-nightly").iterdir()) == ["2026-12-31", LATEST]
