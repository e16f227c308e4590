"""Gates: one-line checks read from a TOML file, each evaluated to pass / warn / fail / underpowered.

A check is ``[fail|warn] METRIC CONDITION [for SELECTOR]``: absolute on the candidate's value, or relative to
the baseline (it fires when the change is beyond the threshold *and* significant: :class:`RelativeCheck`).
One line a check, so a gates file reads as a list of promises and a message can name the line that broke.
The file's keys and the grammar (selectors, units, load checks): docs/deciding.md, "Gates".

>>> check = parse_check("warn same_doc_multi_chunk_recall drop <= 0.02", path="g.toml", line=3)
>>> check.severity, check.metric, check.threshold, check.id
('warn', 'same_doc_multi_chunk_recall', 0.02, 'same_doc_multi_chunk_recall drop <= 0.02')
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from rag_eval.compare.catalog import Metric, catalog
from rag_eval.compare.checks import AbsoluteCheck, Check, GateResult, Outcome, RelativeCheck, Severity, min_units
from rag_eval.compare.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_RULE,
    DEFAULT_SEED,
    MAX_RESAMPLES,
    RULES,
    Settings,
    required_resamples,
)
from rag_eval.core.errors import GatesError, quoted
from rag_eval.core.parsing import check_regular, parse_toml
from rag_eval.experiment import Experiment
from rag_eval.metrics.registry import SERVICE, find

__all__ = [
    "SELECTOR_KEYS", "SHIPPED", "AbsoluteCheck", "Check", "GateResult", "GateSet", "Outcome", "RelativeCheck",
    "Severity", "experiment_gates", "gates_from_table", "load_gates", "manifest_gates", "min_units", "parse_check",
    "run_gates", "shipped_path", "shown_source",
]  # fmt: skip

SHIPPED = ("default", "nightly", "rollout")  # gates files shipped in rag_eval/compare/shipped/
SELECTOR_KEYS = ("name", "pipeline", "mode", "retrieve_k", "return_n", "cap")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_SPEC = re.compile(
    rf"^(?:(?P<severity>fail|warn)\s+)?(?P<metric>\S+)\s+"
    rf"(?:(?P<direction>drop|growth|rise)\s*<=\s*|(?P<op>==|!=|<=|>=|<|>)\s*)"
    rf"(?P<number>{_NUMBER})\s*(?P<unit>%|ms|us|µs|s)?(?:\s+for\s+(?P<selector>.+?))?\s*$"
)
_STANDARD = re.compile(r"^(chunk|doc):(?:(?:P|R|nDCG|Success)@[1-9]\d*|RR)$")
_TIME_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}  # to microseconds, the unit of every latency figure
_LOAD_NAME = re.compile(r"^load:(?:(?:search|e2e):p(?:50|95|99)|qps)@[1-9]\d{0,3}$")  # see compare.load_gates


@dataclass(frozen=True, slots=True, kw_only=True)
class GateSet:
    """The checks of one gates file (or an experiment's ``[gates]`` table) and its settings."""

    source: str
    checks: tuple[AbsoluteCheck | RelativeCheck, ...] = ()
    settings: Settings = field(default_factory=Settings)
    purpose: str = ""  # why these gates (printed beside the verdict), e.g. why a rollout only warns

    def resamples_for(self, tested: int) -> int:
        """The randomisation resamples of a comparison of ``tested`` numbers (:func:`required_resamples`); refused
        when Holm's first step at this alpha needs more than :data:`MAX_RESAMPLES` (a tiny alpha draws for days)."""
        alpha = self.settings.alpha
        need = required_resamples(tested, alpha, self.settings.resamples)
        if need > MAX_RESAMPLES:
            raise GatesError(
                f"alpha {alpha:g} over {tested:,} tested numbers needs {need:,} resamples for Holm's first step to be "
                f"reachable, more than the {MAX_RESAMPLES:,} a comparison draws: raise alpha", path=self.source,
            )  # fmt: skip
        return need

    def validate(self, metrics: Sequence[Metric]) -> None:
        """Every check names a metric of this comparison, in a direction that metric has."""
        by_name = {m.name: m for m in metrics}
        for check in self.checks:
            if check.metric.startswith("load:"):  # read from load.json, checked when parsed
                continue
            metric = by_name.get(check.metric)
            if metric is None:
                close = difflib.get_close_matches(check.metric, list(by_name), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else " (see docs/measures.md for the metric names)"
                raise check.error(f"unknown metric {quoted(check.metric)} for these runs{hint}")
            if isinstance(check, RelativeCheck):
                if not metric.tested:
                    raise check.error(f"{check.metric} is an invariant: give it an absolute check (<=, ==, ...)")
                wrong = "drop" if metric.higher_is_better is False else "growth"
                if check.direction == wrong and metric.higher_is_better is not None:
                    better = "lower" if metric.higher_is_better is False else "higher"
                    right = "growth" if wrong == "drop" else "drop"
                    raise check.error(f"{check.metric} is better {better}: its regression is a {right}")



def parse_check(spec: str, *, path: str, line: int | None = None) -> AbsoluteCheck | RelativeCheck:
    """One check from its one-line text (see the module docstring)."""
    if not isinstance(spec, str) or not spec.strip():
        raise GatesError("a check must be a non-empty string", path=path, line=line, check=str(spec))
    m = _SPEC.match(spec.strip())
    if m is None:
        raise GatesError(
            "expected '[fail|warn] METRIC OP NUMBER[%|us|ms|s] [for SELECTOR]' (OP: == != <= >= < >) "
            "or '[fail|warn] METRIC drop|growth <= NUMBER[%|us|ms|s] [for SELECTOR]'",
            path=path,
            line=line,
            check=spec,
        )
    metric = m["metric"]
    number = float(m["number"])
    if not math.isfinite(number):
        raise GatesError("the threshold must be a finite number", path=path, line=line, check=spec)
    unit = m["unit"]
    threshold = number / 100 if unit == "%" else number * _TIME_UNITS.get(unit or "", 1.0)
    selector = _selector(m["selector"], spec=spec, path=path, line=line)
    severity: Severity = "warn" if m["severity"] == "warn" else "fail"
    load = metric.startswith("load:")
    if load and not _LOAD_NAME.match(metric):
        raise GatesError(
            f"unknown load metric {quoted(metric)}: load:search|e2e:p50|p95|p99@N or load:qps@N (N clients, 1..9999)",
            path=path, line=line, check=spec,
        )  # fmt: skip
    if not load and metric not in _known_names() and not _STANDARD.match(metric):
        close = difflib.get_close_matches(metric, sorted(_known_names()), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else " (see docs/measures.md for the metric names)"
        raise GatesError(f"unknown metric {quoted(metric)}{hint}", path=path, line=line, check=spec)
    timed = metric.startswith("latency:") or (load and not metric.startswith("load:qps"))
    if unit in _TIME_UNITS and not timed:
        raise GatesError(f"{quoted(unit)} is a time unit: {metric} is not a latency", path=path, line=line, check=spec)
    if load and timed and unit == "%" and not m["direction"]:
        raise GatesError(
            "a latency limit is a time (us, ms, s); % is for a growth", path=path, line=line, check=spec
        )  # fmt: skip
    beyond = _beyond_range(metric, threshold, unit=unit, number=m["number"], relative_to=m["direction"])
    if beyond:
        raise GatesError(beyond, path=path, line=line, check=spec)
    if m["direction"]:
        if threshold < 0:
            raise GatesError("a drop or growth threshold must be >= 0", path=path, line=line, check=spec)
        direction: Literal["drop", "growth"] = "drop" if m["direction"] == "drop" else "growth"
        if load and (direction == "drop") == timed:
            right = "growth" if timed else "drop"
            better = "lower" if timed else "higher"
            raise GatesError(
                f"{metric} is better {better}: its regression is a {right}", path=path, line=line, check=spec
            )  # fmt: skip
        return RelativeCheck(
            spec=spec.strip(), severity=severity, metric=metric, threshold=threshold, selector=selector, path=path,
            line=line, direction=direction, relative=unit == "%",
        )  # fmt: skip
    return AbsoluteCheck(
        spec=spec.strip(), severity=severity, metric=metric, threshold=threshold, selector=selector, path=path,
        line=line, op=m["op"],
    )  # fmt: skip


def _beyond_range(metric: str, threshold: float, *, unit: str | None, number: str, relative_to: str | None) -> str:
    """Why a threshold lies where the metric never goes (every metric is >= 0, a share or score <= 1), so that the
    check's outcome could never depend on the data; "" when it is a threshold the metric can be on either side of.
    A drop may not exceed the whole value (100%, or 1 for a share or score); a growth has no bound above.

    >>> _beyond_range("cap_compliance", 95.0, unit=None, number="95", relative_to=None)
    'cap_compliance is a share, between 0 and 1 (0% and 100%): 95 is outside it (did you mean 95%?)'
    >>> _beyond_range("payload:chars_p50", -1.0, unit=None, number="-1", relative_to=None)
    'payload:chars_p50 is never negative: a threshold of -1 is outside its range'
    >>> _beyond_range("chunk:nDCG@5", 1.0, unit=None, number="1", relative_to=None)
    ''
    """
    found = find(metric)
    kind = found.unit if found is not None else ("qps" if metric.startswith("load:qps") else "us")
    bounded = kind in ("share", "score")
    shown = f"{number}{unit or ''}"
    if relative_to is not None:
        if relative_to == "drop" and (threshold > 1 if unit == "%" else bounded and threshold > 1):
            whole = "100%" if unit == "%" else "1"
            return f"a drop of {metric} can never exceed {whole} (all of it): {shown} is outside its range"
        return ""
    if threshold < 0:
        return f"{metric} is never negative: a threshold of {shown} is outside its range"
    if bounded and threshold > 1:
        hint = f" (did you mean {number}%?)" if unit is None and threshold <= 100 else ""
        return f"{metric} is a {kind}, between 0 and 1 (0% and 100%): {shown} is outside it{hint}"
    return ""


def _selector(text: str | None, *, spec: str, path: str, line: int | None) -> tuple[tuple[str, str], ...]:
    if not text:
        return ()
    out = []
    for part in (p.strip() for p in text.split(",")):
        key, eq, glob = part.partition("=")
        if not eq:
            key, glob = "name", part
        key = key.strip().replace("-", "_")
        if key not in SELECTOR_KEYS or not glob.strip():
            raise GatesError(
                f"bad selector {quoted(part)}: a config name glob or KEY=GLOB with KEY one of "
                f"{', '.join(SELECTOR_KEYS)}",
                path=path,
                line=line,
                check=spec,
            )
        out.append((key, glob.strip()))
    return tuple(out)


def _known_names() -> set[str]:
    return {m.name for m in catalog((1,), traffic=True)} | {m.name for m in SERVICE}  # SERVICE: service.toml


# -- files ------------------------------------------------------------------------------------

_SETTINGS: dict[str, type | tuple[type, ...]] = {
    "alpha": (int, float),
    "resamples": int,
    "seed": int,
    "power": (int, float),
}


def shipped_path(name: str) -> Path:
    return Path(str(resources.files("rag_eval.compare") / "shipped" / f"{name}.toml"))


def shown_source(source: str, *, cwd: Path | None = None) -> str:
    """How a gates file is named in compare.json, summary.md and the console: a shipped file by its place
    in the package, a file under the working directory relative to it, never a machine's absolute path
    where either applies.

    >>> shown_source(str(shipped_path("nightly")))
    'rag_eval/compare/shipped/nightly.toml'
    >>> shown_source("/ci/build/gates/mine.toml", cwd=Path("/ci/build")), shown_source("(experiment)")
    ('gates/mine.toml', '(experiment)')
    """
    path = Path(source)
    if not path.is_absolute():
        return source
    shipped = Path(str(resources.files("rag_eval.compare") / "shipped"))
    for root, prefix in ((shipped, "rag_eval/compare/shipped/"), ((cwd or Path.cwd()), "")):
        try:
            return prefix + path.relative_to(root).as_posix()
        except ValueError:
            continue
    return source


def load_gates(ref: str | Path, *, base: Path | None = None) -> GateSet:
    """A gates file by path, or a shipped one by name (``default``, ``nightly``, ``rollout``)."""
    text_ref = str(ref)
    path = Path(text_ref) if base is None or Path(text_ref).is_absolute() else base / text_ref
    if text_ref in SHIPPED and not path.is_file():
        path = shipped_path(text_ref)
    try:
        check_regular(path)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        close = difflib.get_close_matches(text_ref, SHIPPED, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise GatesError(
            f"cannot read the gates file: no such file, nor a shipped one ({hint}shipped: {', '.join(SHIPPED)})",
            path=str(path),
        ) from exc
    except OSError as exc:
        raise GatesError(f"cannot read the gates file: {exc.strerror}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise GatesError(f"not UTF-8 ({exc.reason} at byte {exc.start:,})", path=str(path)) from exc
    try:
        table = parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at line (\d+), column \d+\)", str(exc))  # tomllib keeps the position in the text
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line = int(where.group(1)) if where else None
        raise GatesError(f"not valid TOML: {message}", path=str(path), line=line) from exc
    unknown = [k for k in table if k != "gates"]
    if unknown or not isinstance(table.get("gates"), dict):
        first = unknown[0] if unknown else "gates"
        raise GatesError(
            "a gates file holds one [gates] table (alpha, resamples, seed, power, checks)",
            path=str(path),
            line=_line_of_key(text, first),
        )
    return gates_from_table(table["gates"], path=str(path), text=text)


def gates_from_table(table: Mapping[str, Any], *, path: str, text: str, base: Path | None = None) -> GateSet:
    """A ``[gates]`` table: inline checks, settings and ``purpose`` (why these gates, in words), or
    ``file = PATH`` (relative to ``base``) or ``file = "nightly"`` naming a shipped file."""
    if "file" in table:
        if set(table) != {"file"} or not isinstance(table["file"], str):
            raise GatesError(
                "[gates] takes either file = PATH or inline settings and checks, not both",
                path=path,
                line=_line_of_key(text, "file"),
            )
        return load_gates(table["file"], base=base if base is not None else Path(path).parent)
    values: dict[str, Any] = {}
    purpose = table.get("purpose", "")
    if not isinstance(purpose, str):
        raise GatesError("purpose must be a string", path=path, line=_line_of_key(text, "purpose"))
    rule = table.get("rule", DEFAULT_RULE)
    if rule not in RULES:
        raise GatesError(
            f"rule must be one of {', '.join(RULES)}, got {quoted(rule)}", path=path, line=_line_of_key(text, "rule")
        )
    for key, value in table.items():
        if key in ("checks", "purpose", "rule"):
            continue
        kind = _SETTINGS.get(key)
        if kind is None:
            raise GatesError(
                f"unknown key {quoted(key)} (known: file, checks, purpose, rule, {', '.join(_SETTINGS)})", path=path,
                line=_line_of_key(text, key),
            )  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, kind):
            raise GatesError(f"{key} must be a number, got {quoted(value)}", path=path, line=_line_of_key(text, key))
        values[key] = value
    problems = {
        "alpha": not 0 < values.get("alpha", 0.05) < 1,
        "power": not 0 < values.get("power", 0.8) < 1,
        "resamples": not 99 <= values.get("resamples", 4999) <= MAX_RESAMPLES,
        "seed": values.get("seed", 0) < 0,
    }
    for key, bad in problems.items():
        if bad:
            allowed = {"alpha": "within (0, 1)", "power": "within (0, 1)", "seed": ">= 0",
                       "resamples": f"within [99, {MAX_RESAMPLES:,}]"}[key]  # fmt: skip
            raise GatesError(
                f"{key} must be {allowed}, got {quoted(values[key])}", path=path, line=_line_of_key(text, key)
            )
    raw_checks = table.get("checks", [])
    if not isinstance(raw_checks, list):
        raise GatesError("checks must be an array of strings", path=path, line=_line_of_key(text, "checks"))
    checks: list[AbsoluteCheck | RelativeCheck] = []
    offset = 0
    for raw in raw_checks:
        line, offset = _locate(text, str(raw), offset)
        checks.append(parse_check(raw, path=path, line=line or _line_of_key(text, "checks")))
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], int | None] = {}
    for c in checks:
        same = (c.id.split(" for ")[0], c.selector)
        if same in seen:
            raise c.error(f"the same check is already given on line {seen[same]}")
        seen[same] = c.line
    settings = Settings(
        alpha=float(values.get("alpha", 0.05)),
        resamples=int(values.get("resamples", DEFAULT_RESAMPLES)),
        seed=int(values.get("seed", DEFAULT_SEED)),
        power=float(values.get("power", 0.8)),
        rule=rule,
    )
    return GateSet(source=path, checks=tuple(checks), settings=settings, purpose=" ".join(purpose.split()))


def _line_of_key(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*\[?\s*{re.escape(key)}\s*[=\]]")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def _locate(text: str, needle: str, offset: int) -> tuple[int | None, int]:
    """(line, offset after it) of a check's text at or after ``offset`` (TOML keeps no positions)."""
    needle = needle.strip()
    at = text.find(needle, offset) if needle else -1
    if at < 0:
        return None, offset
    return text.count("\n", 0, at) + 1, at + len(needle)


def experiment_gates(table: Mapping[str, Any] | None, *, source: str | None) -> GateSet:
    """The gates of an experiment: its ``[gates]`` table (inline, or ``file =`` a gates file relative
    to the experiment file, or a shipped name), else the shipped default."""
    if table is None:
        return load_gates("default")
    path = source or "(experiment)"
    text = ""
    if source:
        try:
            check_regular(Path(source))
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""  # only used to find line numbers
    base = Path(source).parent if source else Path.cwd()
    return gates_from_table(table, path=path, text=text, base=base)


def run_gates(given: GateSet | None, exp: Experiment) -> GateSet:
    """The gates a run applies (``given``, else its experiment's, else the shipped default), checked
    against the metrics of its cutoffs before anything runs."""
    gates = given if given is not None else experiment_gates(exp.gates, source=exp.source)
    gates.validate(catalog(exp.cutoffs, traffic=exp.traffic is not None))
    return gates


def manifest_gates(manifest: Mapping[str, Any]) -> GateSet:
    """The gates of the experiment a run's manifest records."""
    exp = manifest.get("experiment", {})
    return experiment_gates(exp.get("gates"), source=exp.get("source"))
