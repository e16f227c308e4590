"""What `rag-eval load` measures: the configs' lookups, or a served endpoint named by --service or --service-url;
a stdio [service], a URL that is not http(s), --service without a table and --configs with an endpoint are
refused with exit 2 and one line, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval.cli import main
from rag_eval.core.errors import ConfigError, UnsupportedFeatureError
from rag_eval.experiment import load_experiment
from rag_eval.experiment.load_table import LoadFlags, LoadSettings
from rag_eval.experiment.load_target import load_endpoint, load_settings, served_config
from rag_eval.experiment.model import ServiceSpec
from tests.conftest import SHIPPED

DEFAULT = SHIPPED / "experiments" / "default.toml"


def test_without_a_flag_the_configs_lookups_are_measured_even_with_a_service_table() -> None:
    assert load_endpoint(ServiceSpec(url="http://h/mcp"), use_service=False, url=None) is None


def test_service_takes_the_tables_url_or_http_endpoint() -> None:
    mcp = ServiceSpec(url="http://h:8000/mcp", timeout=5.0)
    assert load_endpoint(mcp, use_service=True, url=None) == mcp
    plain = ServiceSpec(http="https://h/lookup")
    assert load_endpoint(plain, use_service=True, url=None) == plain


def test_service_url_names_an_mcp_endpoint_and_keeps_the_tables_timeout_without_credentials() -> None:
    got = load_endpoint(ServiceSpec(http="http://other/x", timeout=7.0, config="evidence"), use_service=False,
                        url="https://alice:s3cret@rag.example:8443/mcp?token=t")  # fmt: skip
    assert got is not None and got.url and got.http is None and got.timeout == 7.0 and got.config == "evidence"
    assert got.endpoint == "https://rag.example:8443/mcp" and "s3cret" not in str(got.as_dict())
    assert load_endpoint(None, use_service=True, url="http://h/mcp") == ServiceSpec(url="http://h/mcp")


def test_a_stdio_service_is_refused_naming_it() -> None:
    with pytest.raises(UnsupportedFeatureError, match="over stdio") as err:
        load_endpoint(ServiceSpec(command=("rag-eval", "serve", "--properties", "p")), use_service=True, url=None)
    assert err.value.exit_code == 2 and err.value.uri == "rag-eval serve --properties p"


@pytest.mark.parametrize(
    ("service", "url", "configs", "key", "needle"),
    [
        (None, None, False, "--service", "no [service] table"),
        (None, "ftp://h/mcp", False, "--service-url", "http(s)://"),
        (None, "h:8000/mcp", False, "--service-url", "http(s)://"),
        (ServiceSpec(url="http://h/mcp"), None, True, "--configs", "does not apply"),
    ],
)
def test_bad_endpoint_flags_are_named(
    service: ServiceSpec | None, url: str | None, configs: bool, key: str, needle: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_endpoint(service, use_service=True, url=url, configs_flag=configs)
    assert [p.key for p in err.value.problems] == [key] and needle in err.value.problems[0].message


def test_an_endpoints_results_go_under_the_config_it_is_meant_to_run() -> None:
    exp = load_experiment(DEFAULT)
    assert served_config(exp, ServiceSpec(url="http://h/mcp")) == exp.baseline == "legacy-merge"
    assert served_config(exp, ServiceSpec(url="http://h/mcp", config="evidence")) == "evidence"
    from dataclasses import replace

    chosen = replace(exp, load=LoadSettings(configs=("legacy-first",), rounds=2, duration_s=1.0))
    assert load_settings(chosen, LoadFlags(), None).configs == ("legacy-first",)
    served = load_settings(chosen, LoadFlags(concurrency="1,2"), ServiceSpec(url="http://h/mcp"))
    assert served.configs == () and served.concurrency == (1, 2) and served.rounds == 2


def _with_service(tmp_path: Path, table: str) -> Path:
    text = DEFAULT.read_text(encoding="utf-8").replace('path = ".."', f'path = "{SHIPPED}"')
    text = text.replace('uri = "../../../reports/milvus/incident-kb.db"', f'uri = "{tmp_path / "lite.db"}"')
    text = text.replace('"configs/', f'"{SHIPPED / "experiments" / "configs"}/')
    path = tmp_path / "exp.toml"
    path.write_text(text + "\n" + table, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("table", "argv", "needle"),
    [
        ('[service]\ncommand = ["rag-eval", "serve", "--properties", "x.properties"]\n', ["--service"], "over stdio"),
        ("", ["--service"], "no [service] table"),
        ("", ["--service-url", "127.0.0.1:8000/mcp"], "@ --service-url"),
        ('[service]\nurl = "http://127.0.0.1:9/mcp"\n', ["--service", "--configs", "evidence"], "@ --configs"),
    ],
)
def test_the_cli_refuses_with_exit_2_and_one_line_before_anything_is_written(
    table: str, argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = _with_service(tmp_path, table)
    code = main(["load", str(exp), "-q", "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and needle in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "lite.db").exists()
