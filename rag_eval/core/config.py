"""RagConfig (D4): retrieve width, return width, per-document cap, projector budgets.

Read from Java ``.properties`` exactly as the production service has them, from
TOML tables, or from plain mappings. Precedence (D4): explicit ``rag.retrieve-k`` /
``rag.return-n`` win; where one is absent and the legacy ``rag.top-k`` is set,
``rag.top-k`` fills it; otherwise the defaults apply (20 / 5 / 2).

>>> RagConfig.from_properties_text("rag.top-k=8").retrieve_k
8
>>> RagConfig.from_properties_text("rag.top-k=8\\nrag.return-n=3").return_n
3

Validation collects every problem with its key and raises one ConfigError. A file production would
misread (a byte-order mark, UTF-16 or UTF-32 text) is refused, and so is a ``rag.*`` key with invisible
characters before it or in other letter case: the service would not see it and would use its default.

>>> RagConfig.from_properties_text("\\ufeffrag.retrieve-k=7")  # doctest: +ELLIPSIS
Traceback (most recent call last):
rag_eval.core.errors.ConfigError: 1 configuration problem: unknown key: '\\ufeff' before 'rag.', ...
"""

from __future__ import annotations

import enum
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from rag_eval.core.errors import ConfigError, ConfigProblem, as_written, quoted
from rag_eval.core.parsing import check_regular, parse_toml

DEFAULT_RETRIEVE_K = 20
DEFAULT_RETURN_N = 5
DEFAULT_MAX_CHUNKS_PER_DOCUMENT = 2
DEFAULT_MAX_EXCERPT_CHARS = 2000
DEFAULT_MAX_TOTAL_CHARS = 12000
DEFAULT_MAX_BLOCKS = 8


class PipelineKind(enum.StrEnum):
    """Which post-processing the pipeline runs.

    ``evidence`` is the design (D1-D5): chunk-scoped evidence keys, dedup by key,
    per-document cap, retrieve-k/return-n. The two legacy pipelines are the behaviours
    it replaces, both with document-level identity (``document_id = source``) and one
    width, ``rag.top-k``, for retrieval and return:

    ``legacy-merge``  every chunk of a source is merged into that source's one block
    ``legacy-first``  the design's duplicate rule applied to document identity: the
                      top-scored chunk of a source keeps its content, the others are
                      dropped as duplicates (their hit reasons merged)

    ``legacy`` is accepted as a name for ``legacy-merge`` (:data:`LEGACY_ALIAS`).
    """

    EVIDENCE = "evidence"
    LEGACY_MERGE = "legacy-merge"
    LEGACY_FIRST = "legacy-first"

    @property
    def is_legacy(self) -> bool:
        return self is not PipelineKind.EVIDENCE


# ``rag.pipeline=legacy`` keeps meaning what it meant before there were two legacy pipelines
LEGACY_ALIAS: dict[str, PipelineKind] = {"legacy": PipelineKind.LEGACY_MERGE}


def parse_pipeline(text: str) -> PipelineKind:
    """``evidence``, ``legacy-merge``, ``legacy-first``, or the alias ``legacy`` (= ``legacy-merge``).

    >>> parse_pipeline("legacy").value
    'legacy-merge'
    """
    if text in LEGACY_ALIAS:
        return LEGACY_ALIAS[text]
    return PipelineKind(text)


# property key -> (field name, kind)
_INT_KEYS: dict[str, str] = {
    "rag.retrieve-k": "retrieve_k",
    "rag.return-n": "return_n",
    "rag.max-chunks-per-document": "max_chunks_per_document",
    "rag.top-k": "top_k",
    "rag.projector.max-excerpt-chars": "max_excerpt_chars",
    "rag.projector.max-total-chars": "max_total_chars",
    "rag.projector.max-blocks": "max_blocks",
}
_STR_KEYS: dict[str, str] = {
    "rag.category-filter": "category_filter",
    "rag.pipeline": "pipeline",
}
KNOWN_KEYS: tuple[str, ...] = tuple(sorted((*_INT_KEYS, *_STR_KEYS)))


@dataclass(frozen=True, slots=True, kw_only=True)
class RagConfig:
    """The pipeline's configuration after the D4 fallback has been applied.

    ``top_k`` keeps the legacy value as written (None when absent) so reports can
    show where the widths came from; the pipeline reads ``retrieve_k`` and
    ``return_n`` only.
    """

    retrieve_k: int = DEFAULT_RETRIEVE_K
    return_n: int = DEFAULT_RETURN_N
    max_chunks_per_document: int = DEFAULT_MAX_CHUNKS_PER_DOCUMENT
    top_k: int | None = None
    category_filter: str | None = None
    pipeline: PipelineKind = PipelineKind.EVIDENCE
    max_excerpt_chars: int = DEFAULT_MAX_EXCERPT_CHARS
    max_total_chars: int = DEFAULT_MAX_TOTAL_CHARS
    max_blocks: int = DEFAULT_MAX_BLOCKS

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str | None = None, strict: bool = False) -> RagConfig:
        """Build from ``{"rag.retrieve-k": "20", ...}``; values may be strings or ints.

        Keys outside ``rag.*`` are ignored unless ``strict`` (a production
        ``.properties`` file holds other settings too); an unknown ``rag.*`` key is
        reported as a likely typo.
        """
        problems: list[ConfigProblem] = []
        ints: dict[str, int] = {}
        strs: dict[str, str] = {}
        for key, raw in values.items():
            if not key.startswith("rag."):
                if looks_like := _misspelt_rag_key(key):
                    problems.append(looks_like)
                elif strict:
                    problems.append(
                        ConfigProblem(
                            as_written(key), f"unknown key (rag settings start with 'rag.'){_suggest('rag.' + key)}"
                        )
                    )
                continue
            if key in _INT_KEYS:
                parsed = _parse_int(key, raw, problems)
                if parsed is not None:
                    ints[_INT_KEYS[key]] = parsed
            elif key in _STR_KEYS:
                text = str(raw)  # used exactly as written: "  storage " is not "storage"
                if not text.strip():
                    problems.append(
                        ConfigProblem(key, f"is blank ({quoted(text)}): give a value, or leave the key out for none")
                    )
                else:
                    strs[_STR_KEYS[key]] = text
            else:
                problems.append(ConfigProblem(as_written(key), f"unknown key{_suggest(key)}"))

        pipeline = PipelineKind.EVIDENCE
        if "pipeline" in strs:
            try:
                pipeline = parse_pipeline(strs["pipeline"])
            except ValueError:
                known = ", ".join([*(k.value for k in PipelineKind), *LEGACY_ALIAS])
                problems.append(ConfigProblem("rag.pipeline", f"{quoted(strs['pipeline'])} is not one of {known}"))

        top_k = ints.get("top_k")
        if pipeline.is_legacy:
            # one width for both; retrieve-k/return-n cannot both be honoured by legacy
            for key in ("rag.retrieve-k", "rag.return-n", "rag.max-chunks-per-document"):
                if _INT_KEYS[key] in ints:
                    problems.append(
                        ConfigProblem(key, f"not used by rag.pipeline={pipeline.value} (one width: set rag.top-k)")
                    )
            width = top_k if top_k is not None else DEFAULT_RETURN_N
            retrieve_k = return_n = width
        else:
            fallback_retrieve = top_k if top_k is not None else DEFAULT_RETRIEVE_K
            fallback_return = top_k if top_k is not None else DEFAULT_RETURN_N
            retrieve_k = ints.get("retrieve_k", fallback_retrieve)
            return_n = ints.get("return_n", fallback_return)

        config = cls(
            retrieve_k=retrieve_k,
            return_n=return_n,
            max_chunks_per_document=ints.get("max_chunks_per_document", DEFAULT_MAX_CHUNKS_PER_DOCUMENT),
            top_k=top_k,
            category_filter=strs.get("category_filter"),
            pipeline=pipeline,
            max_excerpt_chars=ints.get("max_excerpt_chars", DEFAULT_MAX_EXCERPT_CHARS),
            max_total_chars=ints.get("max_total_chars", DEFAULT_MAX_TOTAL_CHARS),
            max_blocks=ints.get("max_blocks", DEFAULT_MAX_BLOCKS),
        )
        problems.extend(config.problems(explicit=ints))
        if problems:
            raise ConfigError(problems, path=source)
        return config

    @classmethod
    def from_properties_text(cls, text: str, *, source: str | None = None) -> RagConfig:
        """Parse Java ``.properties`` text (``=``, ``:`` or space separators, escapes,
        continuations) with javaproperties, then apply :meth:`from_mapping`."""
        import javaproperties  # lazy: keeps ``import rag_eval.core`` stdlib-only

        try:
            elements = list(javaproperties.parse(text))  # key-values, comments and blank lines, in order
        except (ValueError, UnicodeError) as exc:
            raise ConfigError([ConfigProblem("(file)", f"not a .properties text: {exc}")], path=source) from exc
        if twice := _rag_keys_given_twice(elements):
            raise ConfigError(twice, path=source)
        values = {e.key: e.value for e in elements if isinstance(e, javaproperties.KeyValue)}  # the last wins, as loads
        return cls.from_mapping(values, source=source)

    @classmethod
    def from_properties_file(cls, path: str | Path) -> RagConfig:
        """Read a ``.properties`` file as UTF-8, else ISO-8859-1 (Java's default); refuse one that production
        would misread (:func:`encoding_problem`)."""
        p = Path(path)
        try:
            check_regular(p)
            data = p.read_bytes()
        except OSError as exc:
            raise ConfigError([ConfigProblem("(file)", f"cannot read: {exc.strerror}")], path=str(p)) from exc
        if why := encoding_problem(data):
            raise ConfigError([ConfigProblem("(file)", why)], path=str(p))
        return cls.from_properties_text(_decoded(data), source=str(p))

    @classmethod
    def from_toml_table(cls, table: Mapping[str, Any], *, source: str | None = None) -> RagConfig:
        """Accept nested tables (``[rag] retrieve-k = 20``, ``[rag.projector] max-blocks = 4``)
        or dotted keys; both flatten to the property names."""
        return cls.from_mapping(_flatten(table), source=source, strict=True)

    @classmethod
    def from_toml_text(cls, text: str, *, source: str | None = None) -> RagConfig:
        try:
            table = parse_toml(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([ConfigProblem("(file)", f"not valid TOML: {exc}")], path=source) from exc
        return cls.from_toml_table(table, source=source)

    # -- validation and views -----------------------------------------------------------------

    def problems(self, *, explicit: Mapping[str, int] | None = None) -> list[ConfigProblem]:
        """Every rule this config breaks, each with the property key it belongs to."""
        out: list[ConfigProblem] = []
        by_field = {f: k for k, f in _INT_KEYS.items()}
        for name in _INT_KEYS.values():
            value = getattr(self, name)
            if value is not None and value <= 0:
                out.append(ConfigProblem(by_field[name], f"must be > 0, got {value}"))
        if self.return_n > self.retrieve_k and self.return_n > 0 and self.retrieve_k > 0:
            key = "rag.return-n" if explicit is None or "return_n" in explicit else "rag.top-k"
            out.append(ConfigProblem(key, f"return-n ({self.return_n}) must not exceed retrieve-k ({self.retrieve_k})"))
        return out

    def as_properties(self) -> dict[str, str]:
        """The effective settings as property keys (the fallback already applied)."""
        out = {
            "rag.pipeline": self.pipeline.value,
            "rag.retrieve-k": str(self.retrieve_k),
            "rag.return-n": str(self.return_n),
            "rag.max-chunks-per-document": str(self.max_chunks_per_document),
            "rag.projector.max-excerpt-chars": str(self.max_excerpt_chars),
            "rag.projector.max-total-chars": str(self.max_total_chars),
            "rag.projector.max-blocks": str(self.max_blocks),
        }
        if self.top_k is not None:
            out["rag.top-k"] = str(self.top_k)
        if self.category_filter is not None:
            out["rag.category-filter"] = self.category_filter
        return out

    def with_(self, **changes: Any) -> RagConfig:
        """A copy with fields changed, validated again."""
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise TypeError(f"unknown RagConfig fields: {sorted(unknown)}")
        new = replace(self, **changes)
        problems = new.problems()
        if problems:
            raise ConfigError(problems)
        return new


INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # the production service reads these keys as Java ints
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int(key: str, raw: Any, problems: list[ConfigProblem]) -> int | None:
    """An integer as Java's ``Integer.parseInt`` reads it (surrounding whitespace aside): optional sign,
    ASCII digits only (no ``2_0``, no ``1e3``), within the 32-bit range."""
    if isinstance(raw, bool):
        problems.append(ConfigProblem(key, f"{quoted(raw)} is not an integer"))
        return None
    if isinstance(raw, int):
        value = raw
    else:
        text = str(raw).strip()
        if not _JAVA_INT.fullmatch(text):
            hint = ""
            if "#" in text or "!" in text:
                hint = " (in .properties a comment starts only at the beginning of a line)"
            problems.append(ConfigProblem(key, f"{quoted(text)} is not an integer{hint}"))
            return None
        sign, digits = ("-" if text[0] == "-" else ""), text.lstrip("+-").lstrip("0") or "0"
        if len(digits) > len(str(INT_MAX)):  # more digits than int() may convert, too
            problems.append(ConfigProblem(key, f"{quoted(text)} is outside the 32-bit integer range the service reads"))
            return None
        value = int(sign + digits, 10)
    if not INT_MIN <= value <= INT_MAX:
        problems.append(ConfigProblem(key, f"{value} is outside the 32-bit integer range the service reads"))
        return None
    return value


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # the .properties default encoding


# Byte-order marks, the longest first (UTF-32LE's begins with UTF-16LE's)
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "UTF-32 text"),
    (b"\x00\x00\xfe\xff", "UTF-32 text"),
    (b"\xef\xbb\xbf", "a UTF-8 byte-order mark"),
    (b"\xff\xfe", "UTF-16 text"),
    (b"\xfe\xff", "UTF-16BE text"),
)
_SAVE_AS = "save the file as UTF-8 without a byte-order mark"


def encoding_problem(data: bytes) -> str | None:
    """Why production would misread the ``.properties`` bytes ``data``, or None. Java's
    ``Properties.load`` (ISO-8859-1) and Spring Boot (UTF-8) strip no byte-order mark: it becomes part of
    the first key; UTF-16 and UTF-32 text becomes keys interleaved with NUL bytes.

    >>> encoding_problem(b"rag.top-k=5") is None
    True
    >>> encoding_problem("rag.top-k=5".encode("utf-16")).split(":")[0]
    'is UTF-16 text (a byte-order mark FF FE)'
    """
    bom, kind = next(((bom, kind) for bom, kind in _BOMS if data.startswith(bom)), (b"", ""))
    if not bom:
        if b"\x00" not in data:
            return None
        return (
            "holds NUL bytes, as UTF-16 or UTF-32 text without a byte-order mark does: production reads "
            f".properties as ISO-8859-1 or UTF-8, so it would see none of its keys and would use every default; "
            f"{_SAVE_AS}"
        )
    if kind.startswith("a UTF-8"):
        first = _first_key(data[len(bom) :])
        lost = f"would not see {quoted(first)}" if first else "would not see its first key"
        return (
            f"starts with {kind}, which production's .properties readers (Java's Properties, Spring Boot) keep as "
            f"part of the first key: the service {lost} and would use its default; {_SAVE_AS}"
        )
    return (
        f"is {kind} (a byte-order mark {bom.hex(' ').upper()}): production reads .properties as ISO-8859-1 or "
        f"UTF-8, so it would see none of its keys and would use every default; {_SAVE_AS}"
    )


def _rag_keys_given_twice(elements: Iterable[Any]) -> list[ConfigProblem]:
    """A ``rag.`` key given again with another value among a file's ``javaproperties.parse`` elements: production's
    reader keeps the last, so the first is lost without a word (the same value twice is harmless). Lines are the
    file's (counted in every element's source, comments and blank lines too), a continued value's first.

    >>> import javaproperties
    >>> text = "rag.top-k=5\\nother=1\\n# note\\nrag.top-k = 7\\nrag.top-k=7\\n"
    >>> [p.message for p in _rag_keys_given_twice(javaproperties.parse(text))]
    ['given twice with other values, 5 on line 1 and 7 on line 4: production keeps the last and loses line 1; keep one']
    """
    first: dict[str, tuple[int, str]] = {}
    out: list[ConfigProblem] = []
    line = 1
    for element in elements:
        key, value = getattr(element, "key", None), getattr(element, "value", None)
        if isinstance(key, str) and isinstance(value, str) and key.startswith("rag."):
            seen = first.setdefault(key, (line, value))
            if seen[1] != value:
                why = (f"given twice with other values, {seen[1]} on line {seen[0]} and {value} on line {line}: "
                       f"production keeps the last and loses line {seen[0]}; keep one")  # fmt: skip
                out.append(ConfigProblem(key, why))
                first[key] = (line, value)
        line += max(1, len(element.source.splitlines()))
    return out


def _first_key(data: bytes) -> str | None:
    import javaproperties

    try:
        pairs = javaproperties.loads(_decoded(data))
    except (ValueError, UnicodeError):
        return None
    return next(iter(pairs), None)


def _misspelt_rag_key(key: str) -> ConfigProblem | None:
    """A problem when ``key`` is a ``rag.`` key behind invisible characters (a byte-order mark, a zero-width
    space, a control character) or in other letter case: the service reads keys exactly, and would not see it."""
    stripped = key.lstrip("".join(ch for ch in key[:8] if ch.isspace() or not ch.isprintable()))
    if not stripped.lower().startswith("rag."):
        return None
    junk = key[: len(key) - len(stripped)]
    why = f"{quoted(junk)} before 'rag.'" if junk else "keys are case-sensitive"
    return ConfigProblem(
        quoted(key), f"unknown key: {why}, which the service would not see{_suggest(stripped.lower())}"
    )


def _suggest(key: str) -> str:
    import difflib  # stdlib; only on the error path

    close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(KNOWN_KEYS)})"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping):
            out.update(_flatten(value, full))
        else:
            out[full] = value
    return out
