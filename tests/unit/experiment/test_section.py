"""One table of an experiment file read by type: problems recorded (each ``message @ table.key``), not
raised; paths relative to the experiment file; keys nobody read refused at the end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_eval.core.errors import ConfigProblem
from rag_eval.experiment.section import TableReader


def reader(table: dict[str, object], base: Path = Path("exp")) -> tuple[TableReader, list[ConfigProblem]]:
    problems: list[ConfigProblem] = []
    return TableReader(table, "dataset", problems, base=base), problems


def shown(problems: list[ConfigProblem]) -> list[str]:
    return [str(p) for p in problems]


def test_values_are_read_by_type_and_a_wrong_type_is_a_problem_and_the_default() -> None:
    t, problems = reader({"split": "dev", "n": 3, "x": 2.5, "flag": True, "either": 4})
    assert (t.get("split", str), t.get("n", int), t.get("x", float), t.get("flag", bool)) == ("dev", 3, 2.5, True)
    assert t.get("either", (int, float)) == 4 and t.get("absent", int, 7) == 7
    assert problems == []
    t, problems = reader({"n": "3", "x": True, "y": False, "z": [1], "w": "a"})
    assert t.get("n", int, 1) == 1 and t.get("x", int, 2) == 2 and t.get("y", (int, float), 3) == 3
    assert t.get("z", str) is None and t.get("w", (int, float)) is None
    assert shown(problems) == [
        "expected int, got '3' @ dataset.n",
        "expected a number, got True @ dataset.x",
        "expected a number, got False @ dataset.y",
        "expected str, got [1] @ dataset.z",
        "expected int/float, got 'a' @ dataset.w",
    ]


def test_keys_nobody_read_are_refused_at_the_end_as_written() -> None:
    t, problems = reader({"split": "dev", "colour": "red", "odd key": 1})
    t.get("split", str)
    t.finish()
    assert shown(problems) == ["unknown key @ dataset.colour", "unknown key @ dataset.odd key"]
    t, problems = reader({"a": 1, "b": 2})
    assert t.whole() == {"a": 1, "b": 2}
    t.finish()
    assert problems == []


def test_an_input_path_is_relative_to_the_experiment_file_and_an_empty_one_is_none() -> None:
    t, problems = reader({"path": "data/kb", "abs": "/data/kb", "empty": ""}, base=Path("/exp/dir"))
    assert t.path("path") == Path("/exp/dir/data/kb")
    assert t.path("abs") == Path("/data/kb")
    assert t.path("empty") is None and t.path("absent") is None
    assert t.path("needed", required=True) is None
    assert shown(problems) == ["required @ dataset.needed"]


def test_a_path_with_a_nul_byte_is_a_problem_naming_its_key() -> None:
    t, problems = reader({"path": "a\x00b"})
    assert t.path("path") is None and t.output_path("path") is None
    assert [p.key for p in problems] == ["dataset.path", "dataset.path"]


def test_an_output_path_folds_dotdot_and_is_named_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    t, _ = reader({"db": "../milvus/kb.db", "abs": "/x/../y.db"}, base=tmp_path / "experiments")
    assert t.output_path("db") == Path("milvus/kb.db")  # below the working directory: named from there
    assert t.output_path("abs") == Path("/x/../y.db")  # an absolute path as it is
    outside, _ = reader({"db": "../../else.db"}, base=tmp_path / "experiments")
    assert outside.output_path("db") == Path(os.path.normpath(tmp_path.parent / "else.db"))
    relative, _ = reader({"db": "../kb.db"}, base=Path("shipped/experiments"))
    assert relative.output_path("db") == Path("shipped/kb.db")


def test_a_nested_table_is_read_the_same_way_and_absent_is_empty() -> None:
    problems: list[ConfigProblem] = []
    t = TableReader({"index": {"type": "HNSW", "m": "x"}}, "milvus", problems, base=Path("."))
    index = t.sub("index")
    assert index.key("m") == "milvus.index.m" and index.get("type", str) == "HNSW" and index.get("m", int) is None
    assert t.sub("absent").table == {}
    t, problems = reader({"index": 3})
    assert t.sub("index").table == {} and shown(problems) == ["expected Mapping, got 3 @ dataset.index"]
    assert t.key("") == "dataset"
