"""Run directories as a comparison reads them: the per-query table, the summary and the manifest.

Nothing here talks to Milvus: a comparison needs only what a run wrote. The per-query table is the
single source of truth; the summary gives the run's name, baseline and cutoffs, the manifest the
configs (cap, return-n, pipeline) and the provenance that says whether two runs may be paired.

The files are read by the run directory's one reader (:mod:`rag_eval.rundir.reader`).

>>> ComparedRun.from_dir("/nonexistent")  # doctest: +ELLIPSIS
Traceback (most recent call last):
rag_eval.core.errors.RunDirectoryError: /nonexistent: not a run directory (no per_query.parquet, ...
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from rag_eval.core.errors import RunDirectoryError
from rag_eval.metrics import perquery
from rag_eval.metrics.labelfree import OVERLAP_COLUMNS, payloads_of, traffic_values
from rag_eval.metrics.measures import SCALAR_COLUMNS, pair_frame, query_values
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.reader import FinishedRun
from rag_eval.rundir.rows import SCHEMA

IDENTITY = ("query_id", "config", "query_index")  # the columns a run keeps in memory
VALUE_COLUMNS = tuple(dict.fromkeys((*perquery.COLUMNS, *SCALAR_COLUMNS, "origin")))
PAIR_SOURCE = ("query_id", "config", "relevant_chunks", "delivered_relevant")


@dataclass(frozen=False, kw_only=True)
class ComparedRun:
    """One run, from its directory or from memory (a run that is being written)."""

    dir: Path | None
    table: pd.DataFrame  # every per-query column, or only query_id, config and query_index with ``rows``
    summary: Mapping[str, Any]
    manifest: Mapping[str, Any]
    load_doc: Mapping[str, Any] | None = None  # a load measurement still in memory; else DIR/load.json is read
    # the per-query rows read again, one batch at a time (only the given columns): a run's parts or its
    # per_query.parquet; None: ``table`` holds them all
    rows: Callable[[Sequence[str]], Iterator[pa.Table]] | None = None

    @classmethod
    def from_dir(cls, directory: str | Path) -> ComparedRun:
        finished = FinishedRun.read(directory)
        table = finished.table(IDENTITY).to_pandas()
        run = cls(
            dir=finished.dir, table=table, summary=finished.summary, manifest=finished.manifest, rows=finished.batches
        )
        run.check()
        return run

    @classmethod
    def in_store(
        cls, store: RunStore, *, summary: Mapping[str, Any], manifest: Mapping[str, Any], load_doc: Any = None
    ) -> ComparedRun:
        """A run still being written: the identity columns of its parts in memory, every other column read
        again from the parts, one batch at a time, when a comparison asks for it."""
        identity = pa.concat_tables([SCHEMA.empty_table().select(list(IDENTITY)), *store.iter_parts(IDENTITY)])
        return cls(
            dir=store.dir, table=identity.to_pandas(), summary=summary, manifest=manifest, rows=store.iter_parts,
            load_doc=load_doc,
        )  # fmt: skip

    def check(self) -> None:
        where = str(self.dir) if self.dir else "(run)"
        names = [c.get("name") for c in self.configs]
        for key in ("query_id", "config"):
            if key not in self.table.columns:
                raise RunDirectoryError(f"per_query.parquet has no {key!r} column", path=where)
        unknown = sorted(set(self.table["config"]) - set(names))
        if unknown:
            raise RunDirectoryError(f"per_query.parquet has configs the manifest does not list: {unknown}", path=where)
        if self.table.duplicated(["query_id", "config"]).any():
            raise RunDirectoryError("per_query.parquet lists a (query, config) pair twice", path=where)

    # -- what the run says about itself ---------------------------------------------------------

    @property
    def label(self) -> str:
        return str(self.dir) if self.dir is not None else "(this run)"

    @property
    def started(self) -> dict[str, Any]:
        """The run's start and fingerprint, as ``compare.json`` records the run it compared."""
        return {"started": self.manifest.get("started"), "fingerprint": self.manifest.get("fingerprint")}

    @property
    def experiment(self) -> str:
        return str(self.summary.get("experiment") or self.manifest.get("experiment", {}).get("name", ""))

    @property
    def baseline(self) -> str:
        return str(self.summary.get("baseline") or self.manifest.get("experiment", {}).get("baseline", ""))

    @property
    def configs(self) -> list[Mapping[str, Any]]:
        return list(self.manifest.get("configs", []))

    @property
    def config_names(self) -> list[str]:
        return [str(c["name"]) for c in self.configs]

    def config(self, name: str) -> Mapping[str, Any]:
        return next(c for c in self.configs if c["name"] == name)

    @property
    def cutoffs(self) -> tuple[int, ...]:
        return tuple(int(k) for k in self.summary.get("cutoffs") or self.manifest.get("experiment", {}).get("cutoffs"))

    @property
    def query_ids(self) -> list[str]:
        return sorted(set(self.table["query_id"]))

    def data_identity(self) -> dict[str, Any]:
        """What must be equal for two runs to be paired by query id."""
        ds = self.manifest.get("dataset", {})
        exp = self.manifest.get("experiment", {})
        return {
            "data set checksum": ds.get("checksum"),
            "split": ds.get("split"),
            "chunker": exp.get("chunker"),
            "labels": (ds.get("label_level"), exp.get("min_overlap_chars")),
        }

    def experiment_identity(self) -> dict[str, Any]:
        """What makes an earlier run a baseline of this run's experiment (see :func:`experiment_identity`)."""
        return experiment_identity(self.experiment, self.configs)

    def setting_identity(self) -> dict[str, Any]:
        """What may differ between paired runs, but a reader should be told about."""
        mv = self.manifest.get("milvus", {})
        built = mv.get("collection_manifest") or {}
        return {
            # a collection built elsewhere: another fingerprint is a re-ingest, labels resolved again
            "collection (name, fingerprint)": [mv.get("collection"), built.get("fingerprint")],
            "index": mv.get("index"),
            "Milvus backend": (mv.get("backend"), mv.get("server_version")),
            "ingest profile": self.manifest.get("experiment", {}).get("ingest_profile"),
            "git commit": self.manifest.get("git", {}).get("commit"),
        }

    # -- per-unit values ------------------------------------------------------------------------

    @property
    def has_traffic(self) -> bool:
        """Whether the run replayed a query log's queries too (measured apart: :mod:`rag_eval.metrics.labelfree`)."""
        return bool(self.manifest.get("traffic"))

    def payloads(self, config: str) -> dict[str, list[str]]:
        """The delivered chunk list of every query log query under ``config``, by query id."""
        return payloads_of(self.table if self.rows is None else self.rows((*OVERLAP_COLUMNS, "origin")), config)

    @cached_property
    def values(self) -> pd.DataFrame:
        """Per-query values of every config (see :func:`rag_eval.metrics.measures.query_values`); a query
        log's queries valued apart, under ``traffic:`` names (:func:`rag_eval.metrics.labelfree.traffic_values`)."""
        source = self.table if self.rows is None else self.rows(VALUE_COLUMNS)
        labelled = query_values(source, configs=self.configs, cutoffs=self.cutoffs)
        if not self.has_traffic:
            return labelled
        read = (lambda columns: self.table) if self.rows is None else self.rows
        traffic = traffic_values(read, configs=self.configs, cutoffs=self.cutoffs)
        return pd.concat([labelled, traffic], ignore_index=True)

    @cached_property
    def pairs(self) -> pd.DataFrame:
        """(query, document) pairs with >= 2 relevant chunks, per config."""
        source = self.table if self.rows is None else self.rows(PAIR_SOURCE)
        return pair_frame(source, {str(c["name"]): c.get("cap_aware") for c in self.configs})


def check_pairable(identity: Mapping[str, Any], earlier: ComparedRun) -> None:
    """Refuse, before anything runs, to pair a run over the data ``identity`` names (see
    :meth:`ComparedRun.data_identity`) with ``earlier``, a run over other data."""
    theirs = earlier.data_identity()
    diff = [f"{k}: {identity[k]} vs {theirs[k]}" for k in identity if identity[k] != theirs[k]]
    if diff:
        raise RunDirectoryError(
            f"this run would not pair with it: {'; '.join(diff)}; accept a run over the current data "
            "(rag-eval accept) or give --intersection",
            path=earlier.label,
        )


OTHER_EXPERIMENT = "paired with a run of another experiment"  # how a comparison's note says so


def experiment_identity(name: str, configs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The experiment's name and its production cap: the one cap its legacy configs are checked against (the
    manifest's ``cap`` of every config whose cap is not its own; None without a legacy config).

    >>> experiment_identity("kb", [{"cap": 2, "cap_source": "config"}, {"cap": 3, "cap_source": "experiment"}])
    {'experiment': 'kb', 'production cap': 3}
    """
    caps = sorted({c.get("cap") for c in configs if c.get("cap_source") not in (None, "config")}, key=str)
    return {"experiment": name, "production cap": caps[0] if len(caps) == 1 else (caps or None)}


def check_same_experiment(identity: Mapping[str, Any], earlier: ComparedRun, *, force: bool = False) -> list[str]:
    """Refuse to pair a run of the experiment ``identity`` names with ``earlier``, a run of another experiment
    (another name, or another production cap: its cap gates would then judge the run against another cap),
    unless ``force``; forced, the notes that say so. A production cap that one side does not have (no legacy
    config) is not a difference.

    >>> import pandas as pd
    >>> old = ComparedRun(dir=None, table=pd.DataFrame(), summary={"experiment": "a"},
    ...                   manifest={"configs": [{"cap": 3, "cap_source": "experiment.production_cap"}]})
    >>> check_same_experiment({"experiment": "a", "production cap": 3}, old)
    []
    >>> check_same_experiment({"experiment": "b", "production cap": 2}, old, force=True)
    ["paired with a run of another experiment: experiment: 'b' vs 'a'; production cap: 2 vs 3"]
    """
    theirs = earlier.experiment_identity()
    diff = [f"{key}: {identity[key]!r} vs {theirs[key]!r}" for key in identity
            if identity[key] != theirs[key] and None not in (identity[key], theirs[key])]  # fmt: skip
    if not diff:
        return []
    if force:
        return [f"{OTHER_EXPERIMENT}: {'; '.join(diff)}"]
    raise RunDirectoryError(
        f"is a run of another experiment ({'; '.join(diff)}): its gates would judge this run against another "
        "experiment's figures (a cap gate against another cap); compare with a run of this experiment, or give "
        "--other-experiment to pair anyway",
        path=earlier.label,
    )


def differences(run: ComparedRun, against: ComparedRun) -> tuple[list[str], list[str]]:
    """(data differences that forbid pairing, setting differences to report)."""
    data = _diff(run.data_identity(), against.data_identity())
    settings = _diff(run.setting_identity(), against.setting_identity())
    return data, settings


def _diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return [f"{key}: {_short(a[key])} vs {_short(b[key])}" for key in a if a[key] != b[key]]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:16] + "..."


def common_queries(run: ComparedRun, against: ComparedRun | None) -> tuple[list[str], list[str], list[str]]:
    """(query ids in both, only in run, only in against)."""
    mine = set(run.query_ids)
    if against is None:
        return sorted(mine), [], []
    theirs = set(against.query_ids)
    return sorted(mine & theirs), sorted(mine - theirs), sorted(theirs - mine)


def pairings(run: ComparedRun, against: ComparedRun | None) -> Sequence[tuple[str, str, str]]:
    """(baseline config, candidate config, where the baseline comes from) for every comparison:
    within a run every other config against its baseline; against another run every config against
    the same-named config there, else that run's baseline."""
    if against is None:
        return [(run.baseline, name, "run") for name in run.config_names if name != run.baseline]
    names = set(against.config_names)
    return [(name if name in names else against.baseline, name, "against") for name in run.config_names]


def unjudged_note(summary: Mapping[str, Any]) -> str | None:
    """What a verdict says of a run where most queries have no relevance label (fewer than half judged): its
    measures rest on the few that have one. None when most are judged.

    >>> unjudged_note({"baseline": "a", "configs": {"a": {"queries": 40, "judged_queries": 10}}})
    'most queries are unjudged: 10 of 40 have a relevance label, and only those are measured'
    >>> unjudged_note({"baseline": "a", "configs": {"a": {"queries": 40, "judged_queries": 20}}}) is None
    True
    """
    counts = (summary.get("configs") or {}).get(summary.get("baseline")) or summary
    queries, judged = counts.get("queries"), counts.get("judged_queries")
    if not isinstance(queries, int) or not isinstance(judged, int) or queries <= 0 or 2 * judged >= queries:
        return None
    return f"most queries are unjudged: {judged} of {queries} have a relevance label, and only those are measured"
