"""The example scheduled CI workflow parses and runs the nightly job."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import yaml

from tests.conftest import ROOT

WORKFLOW = ROOT / "examples" / "ci" / "github-actions-nightly.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci-nightly.yml"


def load() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def test_workflow_is_scheduled_and_calls_make_nightly() -> None:
    data = load()
    trigger = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    (schedule,) = trigger["schedule"]
    assert len(schedule["cron"].split()) == 5
    steps = data["jobs"]["nightly"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(re.fullmatch(r'\s*make nightly NIGHTLY_EXPERIMENT="\$NIGHTLY_EXPERIMENT"\s*', r) for r in runs)
    assert any("summary.md" in r and "GITHUB_STEP_SUMMARY" in r for r in runs)
    assert not any("ls -td" in r for r in runs)  # tonight is read from LATEST, not guessed from times
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    # the whole night, per_query.parquet included: what `rag-eval accept` takes (tests/integration/test_ci_nights.py)
    assert uploads and uploads[0]["with"]["path"] == "reports/nightly/" and uploads[0]["if"].startswith("always()")
    cached = " ".join(str(s["with"]["path"]) for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    for path in (".venv", "reports/cache/embeddings", "reports/accepted", "reports/history.parquet"):
        assert path in cached


def test_the_accept_job_is_a_manual_run_naming_the_night() -> None:
    data = load()
    trigger = data.get("on", data.get(True))
    assert isinstance(trigger, dict)
    inputs = trigger["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"accept_run", "force"} and inputs["force"]["type"] == "boolean"
    accept = data["jobs"]["accept"]
    assert "inputs.accept_run != ''" in accept["if"] and "inputs.accept_run == ''" in data["jobs"]["nightly"]["if"]
    assert data["permissions"]["actions"] == "read"  # to download another run's artifact
    text = "\n".join(str(s.get("run", "")) for s in accept["steps"])
    assert 'rag-eval accept "$night"' in text and "LATEST" in text


def test_the_experiment_is_named_once_and_agrees_everywhere() -> None:
    env = load()["env"]
    experiment = tomllib.loads((ROOT / env["NIGHTLY_EXPERIMENT"]).read_text())["experiment"]["name"]
    assert env["EXPERIMENT_NAME"] == experiment
    gitlab = yaml.safe_load(GITLAB.read_text())["variables"]
    assert (gitlab["NIGHTLY_EXPERIMENT"], gitlab["EXPERIMENT_NAME"]) == (env["NIGHTLY_EXPERIMENT"], experiment)
    pull = yaml.safe_load(PULL_REQUEST.read_text())
    (job,) = pull["jobs"].values()
    assert job["env"]["EXPERIMENT"] == env["NIGHTLY_EXPERIMENT"]
    assert job["env"]["ACCEPTED"] == f"reports/accepted/{experiment}"
    makefile = (ROOT / "Makefile").read_text()
    assert f"NIGHTLY_EXPERIMENT ?= {env['NIGHTLY_EXPERIMENT']}" in makefile


def test_gitlab_keeps_the_state_and_the_night_and_accepts_by_job_id() -> None:
    data = yaml.safe_load(GITLAB.read_text())
    assert data["nightly"]["script"] == ['make nightly NIGHTLY_EXPERIMENT="$NIGHTLY_EXPERIMENT"']
    assert data["nightly"]["artifacts"]["paths"] == ["reports/nightly/"]
    assert data["nightly"]["artifacts"]["reports"]["junit"].endswith("junit.xml")
    assert {"if": "$ACCEPT_JOB", "when": "never"} in data["nightly"]["rules"]
    assert data["accept"]["rules"] == [{"if": "$ACCEPT_JOB"}]
    (state,) = [c for c in data[".rag-eval"]["cache"] if c["key"] == "nightly-state"]
    assert {"reports/accepted/", "reports/history.parquet"} <= set(state["paths"]) and state["when"] == "always"


def test_every_make_target_names_its_experiment_and_clapnq_has_its_own() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "wildcard $(SHARED_DATASETS)" not in makefile  # no experiment chosen by what is on disk
    for target in ("eval", "traffic", "existing", "nightly"):
        recipe = re.search(rf"^{target}:.*\n\t(.*)\n", makefile, re.M)  # its first line prints the experiment
        assert recipe is not None and re.match(r"@echo \"(nightly )?experiment: ", recipe.group(1)), target
    clapnq = re.search(r"^nightly-clapnq:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert clapnq is not None and "skipped" in clapnq.group(1)
    assert 'echo "nightly experiment: $(CLAPNQ_NIGHTLY)' in clapnq.group(1)
    assert "CLAPNQ_NIGHTLY := tests/experiments/clapnq-nightly.toml" in makefile


def test_workflow_offers_a_milvus_server_commented_out() -> None:
    text = WORKFLOW.read_text()
    assert "services:" not in yaml.safe_dump(load())  # Milvus Lite by default
    assert re.search(r"^\s*#\s*services:", text, re.M) and re.search(r"#\s*MILVUS_URI: http://", text)


def test_make_nightly_passes_a_server_uri() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^nightly:", makefile, re.M)
    assert "--milvus-uri $(MILVUS_URI)" in makefile


PULL_REQUEST = ROOT / "examples" / "ci" / "github-actions-pull-request.yml"


def test_pull_request_workflow_compares_with_the_accepted_baseline_and_keeps_one_comment() -> None:
    data = yaml.safe_load(PULL_REQUEST.read_text())
    trigger = data.get("on", data.get(True))
    assert "pull_request" in trigger and "synchronize" in trigger["pull_request"]["types"]  # every push
    assert data["permissions"]["pull-requests"] == "write"
    (job,) = data["jobs"].values()
    steps = job["steps"]
    by_name = {s.get("name", ""): s for s in steps}
    runs = "\n".join(str(s.get("run", "")) for s in steps)
    assert re.search(r"rag-eval run \"\$EXPERIMENT\"", runs)
    assert re.search(r"rag-eval compare reports/pr --against \"\$ACCEPTED\" --gates nightly", runs)
    assert job["env"]["ACCEPTED"].startswith("reports/accepted/")
    # the accepted baseline comes from the main branch's cache and is never written by a PR
    restores = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache/restore")]
    assert any("reports/accepted" in str(s["with"]["path"]) for s in restores)
    assert not any("reports/accepted" in str(s["with"]["path"]) for s in steps if s.get("uses") == "actions/cache@v4")
    # one comment, found by its hidden marker and updated, else created
    (comment,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/github-script")]
    script = comment["with"]["script"]
    assert "<!-- rag-eval-summary -->" in script and "summary.md" in script
    assert "listComments" in script and "updateComment" in script and "createComment" in script
    assert script.index("updateComment") < script.index("createComment")  # an existing comment is updated
    # the check fails on a failed gate (and on bad input): the compare step's exit code decides
    compare = by_name["Compare with the accepted baseline"]
    assert compare["id"] == "compare" and 'echo "code=$?" >> "$GITHUB_OUTPUT"' in compare["run"]
    final = steps[-1]
    assert final["if"] == "steps.compare.outputs.code != '0'" and "exit 1" in final["run"]
