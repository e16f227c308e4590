"""The run store: one directory per run, every file written atomically.

A run holds the directory's lock from start to end, keeps each finished batch of queries in ``.parts`` (so
``--resume`` runs and counts no query twice) and publishes its final files from ``.staging`` as a set,
``run.complete.json`` last, so a reader never takes half-old, half-new files for a finished run; the parts are
read a batch at a time, so a run's memory does not grow with its queries. The files and the rules:
docs/harness.md, "The run directory".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import filelock
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.core.errors import ConfigError, ConfigProblem, RunStoreError
from rag_eval.core.parsing import TextError, parse_json
from rag_eval.files import replaced, write_json, write_text
from rag_eval.redact import redact_argv
from rag_eval.rundir import parts
from rag_eval.rundir.rows import SCHEMA, rows_to_table

STATE_FILE = "state.json"
ABANDONED = "not resumable"  # the key of STATE_FILE that says why a stopped run's batches are not resumed
PARTS = ".parts"
STAGING = ".staging"
LOCK_FILE = ".lock"
HOLDER_FILE = ".lock.json"
MARKER = "run.complete.json"  # written last, naming every file the run published and the digests of its data
CHECKED_FILES = ("per_query.parquet", "summary.json", "manifest.json")  # never rewritten after the publish
OWN_NAMES = frozenset({LOCK_FILE, HOLDER_FILE, PARTS, STAGING, MARKER})
# what `rag-eval load` and `rag-eval compare --out` write into a directory of their own
OWN_FILES = frozenset({"load.json", "compare.json"})
ROW_GROUP_ROWS = 16_384  # rows per row group of per_query.parquet (parts are much smaller)


class RunStore:
    """One run directory: locked for the life of a run, batches in ``.parts``, final files staged in
    ``.staging`` and published as a set, with ``run.complete.json`` (the files it wrote) last.

    >>> import tempfile
    >>> store = RunStore(Path(tempfile.mkdtemp()) / "run")
    >>> with store.locked():
    ...     _ = store.begin({"experiment": "x"}, resume=False)
    ...     _ = store.stage()
    ...     _ = store.write_json("summary.json", {"ok": True})
    ...     store.publish()
    ...     store.finish()
    ['summary.json']
    >>> sorted(p.name for p in store.dir.iterdir())
    ['.lock', 'run.complete.json', 'summary.json']
    """

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.parts_dir = self.dir / PARTS
        self.staging_dir = self.dir / STAGING
        self._target = self.dir  # where final files go: the staging directory while publishing

    # -- lifecycle ---------------------------------------------------------------------------

    def check_target(self) -> None:
        """Refuse a run directory that is a file, or a symbolic link to nothing, before anything runs."""
        if self.dir.is_symlink() and not self.dir.exists():
            raise ConfigError([ConfigProblem(
                "--out", f"{self.dir} is a symbolic link to {os.readlink(self.dir)}, which does not exist: "
                "give a directory, or create the one it names",
            )])  # fmt: skip
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError([ConfigProblem("--out", f"{self.dir} is a file, not a run directory")])

    def check_out(self, *, force: bool) -> None:
        """Refuse, before anything runs, a directory this run would write its files among without it being
        one rag-eval wrote: a non-empty directory that holds no run, no unfinished run and no load
        measurement (a user's folder, ``/``). ``force``: write there anyway (``--force-out``)."""
        self.check_target()
        if force or not self.dir.is_dir():
            return
        try:
            names = sorted(p.name for p in self.dir.iterdir())
        except OSError:
            return  # an unreadable directory: the lock names what is wrong with it
        if not names or is_rag_eval_dir(self.dir, names):
            return
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        raise ConfigError(
            [
                ConfigProblem(
                    "--out",
                    f"{_cut(str(self.dir))} is not a run directory and not empty ({_cut(shown)}): a run would write "
                    "its files among them; give a new or empty directory, or --force-out to write there anyway",
                )
            ]
        )

    @contextmanager
    def locked(self) -> Iterator[RunStore]:
        """Hold the run directory for the whole run: a second run into it is refused at once (exit 2, naming
        the holder) and the first is left alone. A directory this run created and wrote nothing into is
        removed again, so a refused or failed start leaves nothing behind."""
        self.check_target()
        created = not self.dir.exists()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(f"cannot create the run directory: {exc.strerror}", path=str(self.dir)) from exc
        lock = filelock.FileLock(self.dir / LOCK_FILE, timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise ConfigError(
                [
                    ConfigProblem(
                        "--out",
                        f"{self.dir} is in use by another run ({self._holder()}): wait for it or use another --out",
                    )
                ]
            ) from None
        try:
            write_json(
                self.dir / HOLDER_FILE,
                {"pid": os.getpid(), "host": socket.gethostname(), "started": _now(), "argv": _shown_argv(sys.argv)},
            )
            yield self
        finally:
            (self.dir / HOLDER_FILE).unlink(missing_ok=True)
            lock.release()
            if created and {p.name for p in self.dir.iterdir()} <= {LOCK_FILE}:
                shutil.rmtree(self.dir, ignore_errors=True)

    def _holder(self) -> str:
        try:
            h = parse_json((self.dir / HOLDER_FILE).read_text(encoding="utf-8"))
            argv = " ".join(_shown_argv([str(a) for a in h.get("argv", [])]))
            return f"pid {h.get('pid')} on {h.get('host')}, started {h.get('started')}: {argv}"
        except (OSError, ValueError, TypeError, AttributeError):
            return "a process that holds its lock"

    def resumable(self) -> bool:
        """True when the directory holds an unfinished run that ``--resume`` continues."""
        return (self.parts_dir / STATE_FILE).is_file()

    def check_resumable(self) -> None:
        """Refuse ``--resume`` before anything runs when there is nothing to resume, or when a part in
        ``.parts`` is damaged or not one rag-eval wrote (exit 3 naming it: removed, its batch replays)."""
        if not self.resumable():
            raise ConfigError([ConfigProblem("--resume", f"no unfinished run in {self.dir} (nothing to resume)")])
        for path in parts.listed(self.parts_dir).values():
            parts.check_part(path, str(path), advice=parts.REMOVE)

    def begin(self, identity: Mapping[str, Any], *, resume: bool) -> set[int]:
        """Prepare ``.parts``; returns the batch numbers already finished (resume only).

        ``identity`` is what must not change for a run to be resumed (data set checksum, chunker, index,
        configs, code version, ...); a resume names every entry that changed.
        """
        try:
            state_path = self.parts_dir / STATE_FILE
            if resume:
                self.check_resumable()
                state = _resume_state(state_path)
                if ABANDONED in state:
                    raise ConfigError([ConfigProblem("--resume", f"{self.dir} holds a run that was stopped because "
                                                     f"{state[ABANDONED]}: its batches are not resumed; drop --resume "
                                                     "to start again")])  # fmt: skip
                changed = [
                    f"{key} ({_short(state.get(key))} -> {_short(value)})"
                    for key, value in identity.items()
                    if state.get(key) != json.loads(json.dumps(value))
                ]
                if changed:
                    raise ConfigError(
                        [
                            ConfigProblem(
                                "--resume",
                                f"{self.dir} holds an unfinished run of something else: {'; '.join(changed)} "
                                "changed since; drop --resume to start again, or use another --out",
                            )
                        ]
                    )
                return self.finished_batches()
            if self.parts_dir.exists():
                if not state_path.is_file():
                    raise ConfigError(
                        [ConfigProblem("--out", f"{self.parts_dir} was not written by rag-eval: move it away")]
                    )
                shutil.rmtree(self.parts_dir)
            self.parts_dir.mkdir(parents=True)
            write_json(state_path, dict(identity))
            return set()
        except OSError as exc:
            raise RunStoreError(f"cannot prepare the run directory: {exc.strerror}", path=str(self.dir)) from exc

    def abandon(self, reason: str) -> None:
        """Record in ``.parts`` that the unfinished run there must not be resumed (``reason``: why, in words);
        a new run into the directory starts over."""
        state_path = self.parts_dir / STATE_FILE
        try:
            state = parse_json(state_path.read_text(encoding="utf-8"))
            write_json(state_path, {**state, ABANDONED: reason})
        except (OSError, ValueError) as exc:
            raise RunStoreError(f"cannot record the stopped run: {exc}", path=str(self.dir)) from exc

    def finished_batches(self) -> set[int]:
        return set(parts.listed(self.parts_dir))

    def write_batch(self, number: int, rows: list[dict[str, Any]]) -> None:
        try:
            # not synced: a sync per batch was 12% of a Lite replay; a part a power cut left short is named
            # by --resume's check of the parts (remove it and its batch replays), the published files are synced
            with replaced(self.parts_dir / parts.part_name(number), sync=False) as tmp:
                parts.write(rows_to_table(rows), tmp)
        except OSError as exc:
            raise RunStoreError(f"cannot write a batch: {exc.strerror}", path=str(self.parts_dir)) from exc

    def parts_url(self, base: str | None) -> str:
        """Where a replay's workers write their parts: ``.parts`` itself (``base`` None), or a new
        directory of this replay's own under the parts URL ``base``."""
        return str(self.parts_dir) if base is None else parts.session_url(base)

    def take_part(self, url: str, number: int) -> Path:
        """Move a finished part from the parts URL ``url`` into ``.parts``, whole and checked (a damaged
        part is an error naming it); returns its path there."""
        return parts.take(url, number, self.parts_dir)

    def drop_parts_url(self, url: str) -> None:
        """Remove this replay's own directory under a parts URL, once every part is taken from it."""
        parts.drop_session(url)

    def iter_parts(self, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
        """The finished batches' rows in batch order, one part at a time (only ``columns`` when given)."""
        schema = SCHEMA if columns is None else pa.schema([SCHEMA.field(c) for c in columns])
        found = parts.listed(self.parts_dir)
        for number in sorted(found):
            try:
                table = parts.read(found[number], schema)
            except (pa.ArrowException, OSError, ValueError) as exc:  # damaged since it was written
                why = f"cannot read a finished batch ({exc}): {parts.REMOVE}"
                raise RunStoreError(why, path=str(found[number])) from exc
            yield table

    def check_parts(self) -> None:
        """Refuse parts in which a (query, config) pair appears twice (read by query index, not text)."""
        keys = []
        number: dict[str, int] = {}  # config name -> a number of its own
        for part in self.iter_parts(["query_index", "config"]):
            config = part.column("config").combine_chunks().dictionary_encode()
            code = np.array([number.setdefault(n, len(number)) for n in config.dictionary.to_pylist()], dtype=np.int64)
            index = part.column("query_index").to_numpy().astype(np.int64)
            keys.append(index * 65_536 + code[config.indices.to_numpy()] if len(code) else index)
        flat = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        if len(np.unique(flat)) != len(flat):
            raise RunStoreError(
                "a (query, config) pair appears twice in the parts: start the run again", path=str(self.parts_dir)
            )

    # -- final artifacts: staged, then published as a set ---------------------------------------

    def stage(self) -> Path:
        """Start writing the final files into ``.staging``; returns that directory."""
        try:
            if self.staging_dir.exists():
                shutil.rmtree(self.staging_dir)
            self.staging_dir.mkdir(parents=True)
        except OSError as exc:
            raise RunStoreError(f"cannot stage the run's files: {exc.strerror}", path=str(self.staging_dir)) from exc
        self._target = self.staging_dir
        return self.staging_dir

    def publish(self) -> list[str]:
        """Move every staged file into the run directory, remove the files the previous run there
        published and this one did not (only those: it never deletes by pattern), and write the
        completion marker last. Returns the published files (relative paths)."""
        staged = self.staging_dir
        files = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
        marker = self.dir / MARKER
        previous = published_files(self.dir)
        try:
            recorded = {rel: file_digest(staged / rel) for rel in files if rel in CHECKED_FILES}
            marker.unlink(missing_ok=True)  # until the marker is back, readers see an unfinished run
            for rel in files:
                target = self.dir / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged / rel, target)
            for rel in sorted(set(previous) - set(files)):
                (self.dir / rel).unlink(missing_ok=True)
            write_json(marker, {"files": files, "published": _now(), "sha256": recorded})
            shutil.rmtree(staged, ignore_errors=True)
        except OSError as exc:
            raise RunStoreError(f"cannot publish the run's files: {exc.strerror}", path=str(self.dir)) from exc
        self._target = self.dir
        return files

    def discard_staging(self) -> None:
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        self._target = self.dir

    @property
    def target(self) -> Path:
        """Where final files are written now (``.staging`` while a publish is being prepared)."""
        return self._target

    def write_per_query(self, table: pa.Table | Iterable[pa.Table], provenance: Mapping[str, Any]) -> Path:
        """``per_query.parquet`` from a table or from its parts in order (streamed: row groups of
        :data:`ROW_GROUP_ROWS` rows, written as the parts are read), with the run's provenance."""
        meta = dict(SCHEMA.metadata or {})
        meta[b"rag_eval.provenance"] = json.dumps(provenance, sort_keys=True).encode()
        schema = SCHEMA.with_metadata(meta)
        parts = [table] if isinstance(table, pa.Table) else table
        path = self._target / "per_query.parquet"
        with replaced(path) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            pending: list[pa.Table] = []
            rows = 0
            for part in parts:
                pending.append(part.cast(schema))
                rows += part.num_rows
                if rows >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                    pending, rows = [], 0
            if pending:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
        return path

    def write_trec_runs(
        self,
        rankings: Iterable[tuple[str, str, list[tuple[str, float]], list[tuple[str, float]]]],
        names: Sequence[str],
    ) -> list[Path]:
        """``runs/<config>.trec`` and ``runs/<config>.docs.trec`` of every config in ``names``, from
        (config, query id, chunk ranking, document ranking) in query order, each item with its search score,
        written line by line; the scores as :func:`trec_scores` makes them (score order is the delivered
        order)."""
        runs = self._target / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        targets = {(n, kind): runs / f"{n}{'' if kind == 0 else '.docs'}.trec" for n in names for kind in (0, 1)}
        with ExitStack() as stack:  # every file renamed in only when all of them are written
            files = {
                key: stack.enter_context(open(stack.enter_context(replaced(target)), "w", encoding="utf-8"))
                for key, target in targets.items()
            }
            for name, qid, chunks, docs in rankings:
                for kind, items in ((0, chunks), (1, docs)):
                    fh = files[(name, kind)]
                    scores = trec_scores([score for _, score in items])
                    for rank, ((item, _), score) in enumerate(zip(items, scores, strict=True), start=1):
                        fh.write(f"{qid} Q0 {item} {rank} {score!r} {name}\n")
        return list(targets.values())

    def write_trec_qrels(self, name: str, qrels: Mapping[str, Mapping[str, int]]) -> Path:
        lines = [f"{qid} 0 {item} {grade}" for qid in qrels for item, grade in sorted(qrels[qid].items())]
        path = self._target / "qrels" / f"{name}.trec"
        write_text(path, "\n".join(lines) + ("\n" if lines else ""))
        return path

    def write_json(self, name: str, obj: Any) -> Path:
        path = self._target / name
        write_json(path, obj)
        return path

    def finish(self) -> None:
        shutil.rmtree(self.parts_dir, ignore_errors=True)


def trec_scores(scores: Sequence[float]) -> list[float]:
    """The scores a TREC run writes for items in delivered order: each item's own score, lowered to the
    largest single-precision float below the previous line's where it is not below it in single precision (a
    tie, a later chunk of a merged block, a missing score), so that tools that rank by score read the
    delivered order: trec_eval (and pytrec_eval) keep a score as a C ``float`` and break ties by document name.

    >>> below = lambda x: float(np.nextafter(np.float32(x), np.float32(-np.inf)))
    >>> trec_scores([0.5, 0.25, 0.25, 0.375]) == [0.5, 0.25, below(0.25), below(below(0.25))]
    True
    >>> trec_scores([])
    []
    """
    out: list[float] = []
    down = np.float32(-np.inf)
    for score in scores:
        value = float(score)
        if out and not np.float32(value) < np.float32(out[-1]):  # NaN too
            value = float(np.nextafter(np.float32(out[-1]), down))
        out.append(value)
    return out


def _resume_state(path: Path) -> dict[str, Any]:
    """What an unfinished run recorded of itself; a file damaged or edited so that it is not that is refused."""
    try:
        state = parse_json(path.read_text(encoding="utf-8"))
    except (TextError, UnicodeDecodeError) as exc:
        state = exc
    if not isinstance(state, dict):
        why = state if isinstance(state, Exception) else f"a JSON {type(state).__name__}, not an object"
        raise ConfigError([ConfigProblem("--resume", f"{path} is not the state rag-eval wrote ({why}): drop --resume "
                                         "to start again")])  # fmt: skip
    return state


def published_files(directory: str | Path) -> list[str]:
    """The files the last finished run in ``directory`` published (empty when none finished there)."""
    try:
        return list(parse_json((Path(directory) / MARKER).read_text(encoding="utf-8")).get("files", []))
    except (OSError, ValueError):
        return []


def is_rag_eval_dir(directory: Path, names: Sequence[str]) -> bool:
    """True when ``directory`` (its entries ``names``) is one rag-eval wrote: a finished run, an unfinished
    one (its ``.parts``), a load measurement or a comparison, or only the lock and staging a stopped run leaves."""
    if set(names) <= OWN_NAMES:
        return True
    return (
        MARKER in names
        or (directory / PARTS / STATE_FILE).is_file()
        or {"manifest.json", "per_query.parquet"} <= set(names)
        or bool(set(names) & OWN_FILES)
    )


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recorded_digests(directory: str | Path) -> dict[str, str]:
    """The SHA-256 of each file of :data:`CHECKED_FILES` as the run (or the accepted copy of it) published
    it; empty for a run written before runs recorded them."""
    try:
        found = parse_json((Path(directory) / MARKER).read_text(encoding="utf-8")).get("sha256", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def is_finished(directory: str | Path) -> bool:
    """True when the run directory's last publish completed (its marker is there)."""
    return (Path(directory) / MARKER).is_file()


def _shown_argv(argv: Sequence[str]) -> list[str]:
    """A command line as the lock records and prints it: its first arguments, credentials redacted (also
    of a holder an older version recorded as typed), each cut to a readable length."""
    return [a if len(a) <= 200 else a[:199] + "…" for a in redact_argv(argv[:8])]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
