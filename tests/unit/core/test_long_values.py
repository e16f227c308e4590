"""A value the user wrote is quoted in a message cut to about 200 characters, saying how long it was: a 50 MB
qrels cell, key, name or gate is never repeated into a one-line error."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.core.config import RagConfig
from rag_eval.core.errors import (
    MAX_QUOTED,
    ConfigError,
    DatasetError,
    GatesError,
    LitePathError,
    as_written,
    quoted,
)
from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.experiment import Overrides, default_experiment, with_overrides
from tests.conftest import SHIPPED
from tests.unit.datasets.test_loaders import write_dataset
from tests.unit.experiment.test_experiment_refusals import experiment, refused

HUGE = 52_428_800  # 50 MB
LONG = 1_000_000
LINE = 2_000  # a one-line error with a few cut values and paths stays well under this


def _short_with_length(message: str, length: int) -> None:
    assert "\n" not in message and len(message) < LINE, len(message)
    assert f"({length:,} characters)" in message, message[:LINE]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("test", "'test'"),
        ("a" * MAX_QUOTED, None),  # longer than the limit once quoted: cut
        ("a" * (MAX_QUOTED - 2), "'" + "a" * (MAX_QUOTED - 2) + "'"),  # exactly the limit: whole
        (["x"] * 5, "['x', 'x', 'x', 'x', 'x']"),
    ],
)
def test_quoted_is_repr_when_it_fits(value: object, shown: str | None) -> None:
    text = quoted(value)
    if shown is not None:
        assert text == shown
    else:
        assert text.startswith("'aaa") and text.endswith(f"…' ({MAX_QUOTED:,} characters)")


@pytest.mark.parametrize("value", ["a" * HUGE, "\x00" * LONG, "é\n" * LONG, list(range(LONG))])
def test_quoted_cuts_any_value_to_the_limit(value: object) -> None:
    text = quoted(value)
    head = text.rsplit(" (", 1)[0]
    assert len(head) <= MAX_QUOTED and "\x00" not in text and "\n" not in text
    assert text.endswith(" characters)")


def test_a_50_mb_qrels_cell_is_cut_in_the_run_s_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    shutil.copytree(SHIPPED, data, ignore=shutil.ignore_patterns("src", "experiments"))
    qrels = data / "qrels" / "test.tsv"
    line = len(qrels.read_text(encoding="utf-8").splitlines()) + 1
    with qrels.open("a", encoding="utf-8") as fh:
        fh.write(f"{'q' * HUGE}\t{'d' * HUGE}\t1\n")
    work = tmp_path / "work"
    work.mkdir()
    path = experiment(work, dataset_path=str(data))
    monkeypatch.chdir(work)
    code = cli.main(["run", str(path), "--out", str(work / "out"), "--limit", "4", "-q"])
    err = capsys.readouterr().err
    assert code == 2
    _short_with_length(err.rstrip("\n"), HUGE)
    assert f"test.tsv:{line}: field 'query-id': unknown query 'qqqq" in err
    assert f"test.tsv:{line}: field 'corpus-id': unknown document 'dddd" in err
    assert sorted(p.name for p in work.iterdir()) == [path.name]


@pytest.mark.parametrize(
    ("row", "length"),
    [
        (f"q1\t{'d' * LONG}\t1", LONG),  # unknown document
        (f"q1\td1\t{'9x' * LONG}", 2 * LONG),  # not an integer
    ],
)
def test_long_qrels_cells_are_cut(tmp_path: Path, row: str, length: int) -> None:
    with pytest.raises(DatasetError) as err:
        load_beir(write_dataset(tmp_path, qrels=f"query-id\tcorpus-id\tscore\n{row}\n"))
    _short_with_length(str(err.value), length)


@pytest.mark.parametrize("ident", [f"d {'x' * LONG}", "d" * LONG])
def test_long_ids_are_cut(tmp_path: Path, ident: str) -> None:
    import json

    corpus = [json.dumps({"_id": ident, "text": "a"}), json.dumps({"_id": ident, "text": "b"})]
    with pytest.raises(DatasetError) as err:
        load_beir(write_dataset(tmp_path, corpus=corpus))
    _short_with_length(str(err.value), len(ident))


@pytest.mark.parametrize(
    ("text", "length"),
    [
        (f"rag.retrieve-k={'7' * LONG}x", LONG + 1),  # not an integer
        (f"rag.pipeline={'p' * LONG}", LONG),  # not a pipeline
        ("rag.category-filter=" + "\\ " * LONG, LONG),  # blank: escaped spaces
        (f"rag.{'k' * LONG}=1", LONG + 4),  # an unknown key
        (f"\ufeffrag.{'k' * LONG}=1", LONG + 5),  # an unknown key behind a byte-order mark
        (f"RAG.{'k' * LONG}=1", LONG + 4),  # in other letter case
    ],
)
def test_long_properties_values_and_keys_are_cut(text: str, length: int) -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text(text)
    _short_with_length(str(err.value), length)


def test_long_keys_of_a_toml_config_or_an_experiment_are_cut(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_toml_table({"k" * LONG: 1})
    _short_with_length(str(err.value), LONG)
    from rag_eval.experiment import load_experiment

    for extra in (f'{"k" * LONG} = 1', f"[{'t' * LONG}]"):
        with pytest.raises(ConfigError) as err:
            load_experiment(experiment(tmp_path, dataset=extra) if "=" in extra else experiment(tmp_path, tables=extra))
        _short_with_length(str(err.value), LONG)


@pytest.mark.parametrize(
    ("table", "line"),
    [
        ("experiment", f'baseline = "{"n" * LONG}"'),
        ("dataset", f'split = "{"../" * LONG}"'),
        ("chunker", f'spec = "sentences:size={"1" * LONG}x"'),
        ("milvus.index", f'type = "{"T" * LONG}"'),
        ("ingest", f'profile = "{"p" * LONG}"'),
        ("timing", f'latency = "{"s" * LONG}"'),
    ],
)
def test_long_experiment_values_are_cut(
    tmp_path: Path, table: str, line: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = {"experiment": "experiment", "dataset": "dataset"}
    if table in tables:
        path = experiment(tmp_path, **{tables[table]: line})
    else:
        path = experiment(tmp_path, tables=f"[{table}]\n{line}")
    err = refused(tmp_path, path, capsys, monkeypatch)
    assert "\n" not in err.rstrip("\n") and len(err) < LINE, len(err)
    assert "characters)" in err, err[:LINE]


def test_long_flags_are_cut() -> None:
    exp = default_experiment(str(SHIPPED))
    for flags in ({"profile": "p" * LONG}, {"latency": "s" * LONG}, {"split": "/" * LONG}):
        with pytest.raises(ConfigError) as err:
            with_overrides(exp, Overrides(require_configs=False, **flags))
        _short_with_length(str(err.value), LONG)
    with pytest.raises(ConfigError) as err:
        parse_chunker(f"{'k' * LONG}:size=3")
    _short_with_length(str(err.value), LONG)


def test_a_long_gate_is_cut(tmp_path: Path) -> None:
    from rag_eval.compare.gates import load_gates

    for check in (f"fail {'m' * LONG} == 1", f"fail cap_compliance == 1 for {'=' * LONG}"):
        gates = tmp_path / "gates.toml"
        gates.write_text(f'[gates]\nchecks = ["{check}"]\n')
        with pytest.raises(GatesError) as err:
            load_gates(str(gates)).validate(__import__("rag_eval.compare.catalog", fromlist=["catalog"]).catalog((5,)))
        assert "\n" not in str(err.value) and len(str(err.value)) < LINE, len(str(err.value))
        assert f"({len(check):,} characters)" in str(err.value)


@pytest.mark.parametrize(
    ("value", "limit", "shown"),
    [
        ([1, 2], 6, "[1, 2]"),  # a repr of exactly the limit is whole
        ([1, 2], 5, "[1, … (6 characters)"),
        ("aa", 1, "'…' (2 characters)"),  # no room for a character: none is shown, never a negative cut
        ("abc", 1, "'…' (3 characters)"),
        ("\x00abcdef", 5, "'…' (7 characters)"),  # an escape longer than the room left is not shown
        ("a\x00", 4, "'…' (2 characters)"),
    ],
)  # fmt: skip
def test_quoted_at_the_limit_and_in_the_least_room(value: object, limit: int, shown: str) -> None:
    assert quoted(value, limit) == shown
    cut = shown.split(" (")[0]
    assert len(cut) <= limit or cut == "'…'"


def test_as_written_shows_a_value_of_exactly_the_limit_unquoted() -> None:
    assert as_written("k" * MAX_QUOTED) == "k" * MAX_QUOTED
    assert as_written("k" * (MAX_QUOTED + 1)).endswith(f"({MAX_QUOTED + 1} characters)")


def test_a_lite_path_error_names_the_path_and_survives_a_worker_process() -> None:
    err = LitePathError("it is a directory of other files", path="/data/kb.db")
    again = pickle.loads(pickle.dumps(err))
    for e in (err, again):
        assert (str(e), e.path, e.exit_code) == ("/data/kb.db: it is a directory of other files", "/data/kb.db", 2)
