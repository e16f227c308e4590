"""The example scheduled CI workflow parses and runs the nightly job."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.conftest import ROOT

WORKFLOW = ROOT / "examples" / "ci" / "github-actions-nightly.yml"


def load() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def test_workflow_is_scheduled_and_calls_make_nightly() -> None:
    data = load()
    trigger = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    (schedule,) = trigger["schedule"]
    assert len(schedule["cron"].split()) == 5
    (job,) = data["jobs"].values()
    steps = job["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(re.fullmatch(r"\s*make nightly\s*", r) for r in runs)
    assert any("summary.md" in r and "GITHUB_STEP_SUMMARY" in r for r in runs)
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert uploads and "junit.xml" in uploads[0]["with"]["path"] and uploads[0]["if"].startswith("always()")
    cached = " ".join(str(s["with"]["path"]) for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    for path in (".venv", "reports/cache/embeddings", "reports/accepted", "reports/history.parquet"):
        assert path in cached


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
