"""D4: RagConfig from .properties, TOML and mappings; the legacy rag.top-k fallback."""

from __future__ import annotations

import locale
import sys
from pathlib import Path

import pytest

from rag_eval.core.config import PipelineKind, RagConfig
from rag_eval.core.errors import ConfigError


def test_defaults_are_20_5_2() -> None:
    c = RagConfig.from_properties_text("")
    assert (c.retrieve_k, c.return_n, c.max_chunks_per_document) == (20, 5, 2)
    assert c.top_k is None and c.pipeline is PipelineKind.EVIDENCE


def test_only_legacy_top_k_sets_both_widths() -> None:
    c = RagConfig.from_properties_text("rag.top-k=8\n")
    assert (c.retrieve_k, c.return_n, c.top_k) == (8, 8, 8)


@pytest.mark.parametrize(
    ("text", "widths"),
    [
        ("rag.top-k=8\nrag.retrieve-k=30", (30, 8)),
        ("rag.top-k=8\nrag.return-n=3", (8, 3)),
        ("rag.top-k=8\nrag.retrieve-k=30\nrag.return-n=4", (30, 4)),
        ("rag.retrieve-k=40", (40, 5)),
        ("rag.return-n=7", (20, 7)),
    ],
)
def test_explicit_widths_win_over_top_k(text: str, widths: tuple[int, int]) -> None:
    c = RagConfig.from_properties_text(text)
    assert (c.retrieve_k, c.return_n) == widths


def test_properties_syntax_as_java_reads_it() -> None:
    text = (
        "# production file\n"
        "spring.datasource.url=jdbc:mysql://db/x\n"
        "rag.retrieve-k : 30\n"
        "rag.return-n   6\n"
        "! bang comment\n"
        "rag.max-chunks-per-\\\n    document=3\n"
        "rag.category-filter=runbook\\u00e9\n"
    )
    c = RagConfig.from_properties_text(text)
    assert (c.retrieve_k, c.return_n, c.max_chunks_per_document) == (30, 6, 3)
    assert c.category_filter == "runbooké"


def test_trailing_hash_is_not_a_comment_in_properties() -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text("rag.retrieve-k=20 # vector recall width\n")
    (problem,) = err.value.problems
    assert problem.key == "rag.retrieve-k"
    assert "comment starts only at the beginning of a line" in problem.message


def test_every_problem_is_collected_with_its_key() -> None:
    text = "rag.retrieve-k=abc\nrag.return-n=0\nrag.max-chunks-per-document=-1\nrag.retreive-k=3\n"
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text(text, source="prod.properties")
    keys = sorted(p.key for p in err.value.problems)
    assert keys == ["rag.max-chunks-per-document", "rag.retreive-k", "rag.retrieve-k", "rag.return-n"]
    assert "did you mean 'rag.retrieve-k'" in str(err.value)
    assert str(err.value).startswith("prod.properties: 4 configuration problems")
    assert "\n" not in str(err.value)


def test_return_n_above_retrieve_k_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text("rag.retrieve-k=4\nrag.return-n=5")
    assert [p.key for p in err.value.problems] == ["rag.return-n"]


def test_top_k_with_larger_return_n_names_the_key_that_broke_it() -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text("rag.top-k=3\nrag.return-n=5")
    assert [p.key for p in err.value.problems] == ["rag.return-n"]


def test_toml_nested_and_dotted_tables() -> None:
    nested = RagConfig.from_toml_text("[rag]\nretrieve-k = 50\nreturn-n = 8\n[rag.projector]\nmax-blocks = 4\n")
    dotted = RagConfig.from_toml_table({"rag.retrieve-k": 50, "rag.return-n": 8, "rag.projector.max-blocks": 4})
    assert nested == dotted
    assert (nested.retrieve_k, nested.return_n, nested.max_blocks) == (50, 8, 4)


def test_toml_refuses_keys_outside_rag_and_booleans() -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_toml_table({"retrieve-k": 50, "rag": {"return-n": True}})
    keys = sorted(p.key for p in err.value.problems)
    assert keys == ["rag.return-n", "retrieve-k"]


def test_legacy_pipeline_uses_one_width() -> None:
    c = RagConfig.from_properties_text("rag.pipeline=legacy\nrag.top-k=6")
    assert (c.pipeline, c.retrieve_k, c.return_n) == (PipelineKind.LEGACY_MERGE, 6, 6)
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text("rag.retrieve-k=20\nrag.pipeline=nope")
    assert {p.key for p in err.value.problems} == {"rag.pipeline"}
    with pytest.raises(ConfigError) as err2:
        RagConfig.from_properties_text("rag.pipeline=legacy\nrag.retrieve-k=20")
    assert [p.key for p in err2.value.problems] == ["rag.retrieve-k"]


def test_properties_file_latin1_and_unreadable(tmp_path: Path) -> None:
    f = tmp_path / "app.properties"
    f.write_bytes("rag.category-filter=caf\xe9\n".encode("latin-1"))
    assert RagConfig.from_properties_file(f).category_filter == "café"
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_file(tmp_path / "missing.properties")
    assert err.value.path and err.value.path.endswith("missing.properties")


def test_a_utf8_properties_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    f = tmp_path / "app.properties"
    f.write_bytes("rag.category-filter=café\n".encode())
    assert RagConfig.from_properties_file(f).category_filter == "café"
    # under an ASCII locale, reading in the locale's encoding would fail and fall back to latin-1: 'cafÃ©'
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")
        assert locale.getencoding() != "UTF-8" or sys.flags.utf8_mode
        assert RagConfig.from_properties_file(f).category_filter == "café"
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_as_properties_round_trips() -> None:
    c = RagConfig.from_properties_text("rag.top-k=9\nrag.category-filter=locking\nrag.projector.max-total-chars=999")
    assert RagConfig.from_mapping(c.as_properties()) == c


def test_with_revalidates() -> None:
    c = RagConfig()
    assert c.with_(retrieve_k=50).retrieve_k == 50
    with pytest.raises(ConfigError):
        c.with_(return_n=100)


@pytest.mark.parametrize("value", ["", " ", "\t", "   "])
def test_a_blank_category_filter_is_an_error_never_no_filter(value: str) -> None:
    with pytest.raises(ConfigError, match=r"rag\.category-filter"):
        RagConfig.from_mapping({"rag.category-filter": value})
    with pytest.raises(ConfigError, match="is blank"):
        RagConfig.from_properties_text(f"rag.category-filter={value}")


def test_a_category_filter_is_used_exactly_as_written() -> None:
    assert RagConfig.from_mapping({"rag.category-filter": "  storage  "}).category_filter == "  storage  "
    # .properties drops the whitespace after the separator (as Java does) and keeps the rest
    assert RagConfig.from_properties_text("rag.category-filter=  storage  ").category_filter == "storage  "


@pytest.mark.parametrize("value", ["2_0", "1e3", "0x10", "٣", "20.0", "2147483648", "-2147483649", "99999999999"])
def test_integers_java_would_refuse_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=r"rag\.retrieve-k"):
        RagConfig.from_properties_text(f"rag.retrieve-k={value}")


def test_integers_java_reads() -> None:
    assert RagConfig.from_properties_text("rag.retrieve-k=+30\nrag.return-n= 7 ").retrieve_k == 30
    with pytest.raises(ConfigError, match="outside the 32-bit"):
        RagConfig.from_mapping({"rag.retrieve-k": 2**40})


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("rag.top-k=5\nrag.top-k=7\n", ["given twice with other values, 5 on line 1 and 7 on line 2", "@ rag.top-k"]),
        ("# widths\nrag.retrieve-k = 30\nother.key=1\nrag.retrieve-k = \\\n    40\nrag.return-n=3\n",
         ["given twice with other values, 30 on line 2 and 40 on line 4", "@ rag.retrieve-k"]),
        ("rag.return-n=3\nrag.top-k=5\nrag.return-n:4\nrag.top-k 6\n",
         ["given twice with other values, 3 on line 1 and 4 on line 3", "@ rag.return-n",
          "5 on line 2 and 6 on line 4", "@ rag.top-k"]),
        ("rag.top-k=5\r\nrag.top-k=5\r\nrag.top-k=9\r\n", ["5 on line 1 and 9 on line 3"]),
    ],
)
def test_a_rag_key_given_twice_with_other_values_is_refused_naming_both_lines(text: str, said: list[str]) -> None:
    """Production's reader keeps the last value: the first is lost without a word, so the file is refused."""
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_text(text, source="app.properties")
    message = str(err.value)
    assert message.startswith("app.properties: ") and "\n" not in message
    assert all(part in message for part in said), message
    assert "production keeps the last" in message


def test_a_key_given_twice_with_one_value_or_outside_rag_is_read_as_production_reads_it() -> None:
    c = RagConfig.from_properties_text("rag.top-k=5\nrag.top-k = 5\nspring.port=1\nspring.port=2\n")
    assert (c.retrieve_k, c.return_n) == (5, 5)
