"""A ``.properties`` file production would misread is refused, never read with defaults in place of its keys.

Java's ``Properties.load`` (ISO-8859-1) and Spring Boot (UTF-8) both keep a byte-order mark as part of the
first key, and read UTF-16 or UTF-32 text as keys interleaved with NUL bytes: the service would not see
those keys and would use its defaults. Such a file is refused (exit 2, one line naming the file), and a
``rag.*`` key with invisible characters before it is an unknown key with a suggestion, never ignored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval import cli
from rag_eval.core.config import RagConfig, _misspelt_rag_key, encoding_problem
from rag_eval.core.errors import ConfigError
from tests.conftest import SHIPPED
from tests.unit.experiment.test_experiment_refusals import experiment, refused

TEXT = "rag.retrieve-k=7\nrag.return-n=3\n"
ENCODED = {
    "a UTF-8 byte-order mark": b"\xef\xbb\xbf" + TEXT.encode(),
    "UTF-16 text": TEXT.encode("utf-16"),  # with its byte-order mark
    "UTF-16BE text": b"\xfe\xff" + TEXT.encode("utf-16-be"),
    "UTF-32 text": TEXT.encode("utf-32"),
    "NUL bytes": TEXT.encode("utf-16-le"),  # UTF-16 without a byte-order mark
}


def _file(tmp: Path, kind: str) -> Path:
    path = tmp / "app.properties"
    path.write_bytes(ENCODED[kind])
    return path


@pytest.mark.parametrize("kind", ENCODED)
def test_a_file_production_would_misread_is_refused(tmp_path: Path, kind: str) -> None:
    path = _file(tmp_path, kind)
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_file(path)
    message = str(err.value)
    assert err.value.path == str(path) and message.startswith(f"{path}: ") and "\n" not in message
    assert kind in message and "save the file as UTF-8 without a byte-order mark" in message, message


def test_a_byte_order_mark_names_the_key_production_would_not_see(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"would not see 'rag\.retrieve-k' and would use its default"):
        RagConfig.from_properties_file(_file(tmp_path, "a UTF-8 byte-order mark"))
    with pytest.raises(ConfigError, match="would see none of its keys and would use every default"):
        RagConfig.from_properties_file(_file(tmp_path, "UTF-16 text"))


@pytest.mark.parametrize(
    ("text", "suggested"),
    [
        ("\ufeffrag.retrieve-k=7", "rag.retrieve-k"),  # a byte-order mark read as text
        ("\u200brag.top-k=3", "rag.top-k"),  # a zero-width space pasted in
        ("\x00rag.return-n=3", "rag.return-n"),
        ("RAG.retrieve-k=7", "rag.retrieve-k"),  # keys are case-sensitive: the service would not see it
        ("Rag.Pipeline=legacy", "rag.pipeline"),
    ],
)
def test_a_rag_key_with_junk_before_it_is_unknown_with_a_suggestion(text: str, suggested: str) -> None:
    key = text.partition("=")[0]
    for strict in (False, True):  # a .properties file ignores other keys; a TOML table does not
        with pytest.raises(ConfigError) as err:
            RagConfig.from_mapping({key: text.partition("=")[2]}, strict=strict)
        [problem] = err.value.problems
        assert problem.key == repr(key) and f"did you mean {suggested!r}?" in problem.message, problem
    with pytest.raises(ConfigError, match=f"did you mean {suggested!r}"):
        RagConfig.from_properties_text(text)


def test_other_keys_of_a_production_file_are_still_ignored() -> None:
    config = RagConfig.from_properties_text("server.port=8080\nspring.rag.x=1\nrag.retrieve-k=7\n")
    assert config.retrieve_k == 7


@pytest.mark.parametrize("kind", ["a UTF-8 byte-order mark", "UTF-16 text"])
def test_a_run_with_such_a_config_is_refused_and_writes_nothing(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    props = _file(tmp_path, kind)
    work = tmp_path / "work"
    work.mkdir()
    err = refused(work, experiment(work, properties=str(props)), capsys, monkeypatch)
    assert f"@ configs.evidence ({props}): (file)" in err and kind in err and "at least one" not in err


@pytest.mark.parametrize("command", ["config", "run"])
def test_the_config_flag_and_command_refuse_such_a_file(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    props = _file(tmp_path, "a UTF-8 byte-order mark")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = (
        ["config", str(props)]
        if command == "config"
        else ["run", "--dataset", str(SHIPPED), "--config", f"a={props}", "--milvus-uri", "m.db", "--out", "out", "-q"]
    )
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and str(props) in captured.err and "byte-order mark" in captured.err
    assert "rag.retrieve-k=20" not in captured.out and list(work.iterdir()) == []


def test_a_byte_order_mark_before_no_key_and_nul_bytes_without_one_are_named_exactly() -> None:
    assert encoding_problem(b"\xef\xbb\xbf") == (
        "starts with a UTF-8 byte-order mark, which production's .properties readers (Java's Properties, "
        "Spring Boot) keep as part of the first key: the service would not see its first key and would use "
        "its default; save the file as UTF-8 without a byte-order mark"
    )
    assert encoding_problem("rag".encode("utf-16-le")) == (
        "holds NUL bytes, as UTF-16 or UTF-32 text without a byte-order mark does: production reads .properties "
        "as ISO-8859-1 or UTF-8, so it would see none of its keys and would use every default; save the file as "
        "UTF-8 without a byte-order mark"
    )


def test_a_rag_key_in_other_case_or_behind_invisible_characters_is_named_and_only_then() -> None:
    assert str(_misspelt_rag_key("RAG.top-k")) == (
        "unknown key: keys are case-sensitive, which the service would not see (did you mean 'rag.top-k'?) "
        "@ 'RAG.top-k'"
    )
    # invisible characters count only among the first eight, and a visible one behind them is a real key
    assert _misspelt_rag_key(" " * 8 + "\u200brag.top-k") is None
    assert _misspelt_rag_key("\ufeff\u200bXrag.top-k") is None
    assert _misspelt_rag_key("\ufeff\u200brag.top-k") is not None
