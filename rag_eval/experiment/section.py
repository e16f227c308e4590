"""Typed access to one table of an experiment file, recording problems instead of raising at once.

Each table reader of :mod:`~rag_eval.experiment.tables` gets a :class:`TableReader`: it
reads keys by type, resolves paths the experiment's way, and at the end refuses the keys nobody
read, so that every problem of a file is reported together, each as ``message @ table.key``.

>>> from pathlib import Path
>>> problems: list = []
>>> t = TableReader({"split": 3, "colour": "red"}, "dataset", problems, base=Path("exp"))
>>> t.get("split", str, "test"), t.path("path")
('test', None)
>>> t.finish()
>>> [str(p) for p in problems]
['expected str, got 3 @ dataset.split', 'unknown key @ dataset.colour']
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_eval.core.errors import ConfigProblem, as_written, quoted
from rag_eval.experiment.checks import path_problem


class TableReader:
    """Typed access to a TOML table that records problems instead of raising at once.

    ``base`` is where the file's relative paths start (the experiment file's directory);
    ``present`` says whether the file has the table at all.
    """

    def __init__(
        self, table: Mapping[str, Any], prefix: str, problems: list[ConfigProblem], *, base: Path, present: bool = True
    ) -> None:
        self.table = table
        self.prefix = prefix
        self.problems = problems
        self.base = base
        self.present = present
        self.used: set[str] = set()

    def key(self, key: str) -> str:
        """The full key of ``key`` in this table (``dataset.path``)."""
        return f"{self.prefix}.{key}" if key else self.prefix

    def problem(self, key: str, message: str) -> None:
        self.problems.append(ConfigProblem(self.key(key), message))

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.table:
            return default
        value = self.table[key]
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            self.problem(key, f"expected a number, got {quoted(value)}")
            return default
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            self.problem(key, f"expected {names}, got {quoted(value)}")
            return default
        return value

    def path(self, key: str, *, required: bool = False) -> Path | None:
        """An input path (data set, vectors, .properties): relative to the experiment file; an empty
        string is no path (None, as an absent key)."""
        raw = self.get(key, str)
        if raw is None and required:
            self.problem(key, "required")
        return self.base / raw if self._is_path(key, raw) else None

    def output_path(self, key: str) -> Path | None:
        """An output path (the embedding cache, a Milvus Lite file): relative to the experiment file, as
        every path in it is (``..`` folded, so the run names it as the user would)."""
        raw = self.get(key, str)
        return self.beside(raw) if raw is not None and self._is_path(key, raw) else None

    def beside(self, raw: str) -> Path:
        """``raw`` relative to the experiment file (an absolute path as it is), ``..`` folded; named from
        the working directory when it is below it, as a user would name it there."""
        if Path(raw).is_absolute():
            return Path(raw)
        path = Path(os.path.normpath(self.base / raw))
        if path.is_absolute() and path.is_relative_to(cwd := Path.cwd()):
            return path.relative_to(cwd)
        return path

    def _is_path(self, key: str, raw: str | None) -> bool:
        if raw and (why := path_problem(raw)):
            self.problem(key, why)
            return False
        return bool(raw)

    def sub(self, key: str) -> TableReader:
        """The nested table ``key`` (``milvus.index``), read the same way; absent: an empty one."""
        return TableReader(self.get(key, Mapping, {}), self.key(key), self.problems, base=self.base)

    def whole(self) -> dict[str, Any]:
        """The table as written, every key taken (a table another module reads, such as ``[gates]``)."""
        self.used.update(self.table)
        return dict(self.table)

    def finish(self) -> None:
        """Refuse the keys no reader asked for."""
        for key in self.table:
            if key not in self.used:
                self.problem(as_written(key), "unknown key")
