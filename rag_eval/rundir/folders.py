"""Where runs are written when no directory is given, named once for the CLI, the jobs and the checks.

A run goes to a new ``reports/runs/<experiment>-<UTC time>`` (a load measurement to ``reports/load/...``),
so that a later run never overwrites an earlier one; a night to ``reports/nightly/<experiment>/<UTC date>``
(``.2``, ``.3``... for a second night of that experiment on the same date), whose name the experiment's
``LATEST`` file holds. Stdlib only: the CLI reads these for its ``--help``.

>>> import datetime as dt
>>> when = dt.datetime(2026, 3, 1, 4, 5, 6, tzinfo=dt.UTC)
>>> str(stamped_dir(RUNS, "incident-kb", when)), str(night_dir("/nonexistent/nightly", when))
('reports/runs/incident-kb-20260301T040506Z', '/nonexistent/nightly/2026-03-01')
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

RUNS = Path("reports/runs")  # rag-eval run: RUNS/<experiment>-<UTC time>
LOAD = Path("reports/load")  # rag-eval load: LOAD/<experiment>-<UTC time>
NIGHTS = Path("reports/nightly")  # rag-eval nightly: NIGHTS/<experiment>/<UTC date>
LATEST = "LATEST"  # NIGHTS/<experiment>/LATEST: the name of the experiment's latest night, one line
ACCEPTED = Path("reports/accepted")  # the accepted baselines: ACCEPTED/<experiment>
HISTORY = Path("reports/history.parquet")  # one row per night and config
STAMP = "%Y%m%dT%H%M%SZ"  # the UTC time in a run directory's name
STAMPED_NAME = "<experiment>-<UTC time>"  # how the help and the name checks spell a stamped directory


def stamped_dir(root: str | Path, name: str, when: dt.datetime | None = None) -> Path:
    """``ROOT/<name>-<UTC time>``: a new directory per run."""
    stamp = (when or dt.datetime.now(dt.UTC)).strftime(STAMP)
    return Path(root) / f"{name}-{stamp}"


def night_dir(root: str | Path, when: dt.datetime | None = None) -> Path:
    """``ROOT/<UTC date>``; a second night on the same date gets ``<date>.2``, then ``.3``..."""
    date = (when or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d")
    base = Path(root) / date
    k = 1
    path = base
    while path.exists():
        k += 1
        path = base.with_name(f"{date}.{k}")
    return path


def mark_latest(night: Path) -> Path:
    """Write the night's name into ``LATEST`` beside it (what a CI job reads to find tonight's night).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     latest = mark_latest(Path(d) / "kb-nightly" / "2026-03-01.2")
    ...     latest.name, latest.read_text()
    ('LATEST', '2026-03-01.2\\n')
    """
    night.parent.mkdir(parents=True, exist_ok=True)
    latest = night.parent / LATEST
    tmp = latest.with_name(f".{LATEST}.tmp")
    tmp.write_text(f"{night.name}\n", encoding="utf-8")
    tmp.replace(latest)
    return latest
