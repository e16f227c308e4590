"""Milvus filter literals: a value quoted so that Lite and the server both read it back as it was written.
Never an f-string around user input (the counter-example of the style guide): every filter goes through here
or through pymilvus's filter templating."""

from __future__ import annotations

from rag_eval.core.errors import FilterError, quoted


def milvus_string_literal(value: str) -> str:
    r"""A double-quoted Milvus filter literal that Lite and the server both read back as ``value``.

    Backslash, double quote, CR, LF and TAB are escaped (the only escapes both parsers share); every other
    character, single quotes and unicode included, is literal inside double quotes.

    >>> print(milvus_string_literal("it's \\ \"x\""))
    "it's \\ \"x\""
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FilterError(f"filter value {quoted(value)} is not valid text: pass a UTF-8 string") from exc
    table = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return '"' + "".join(table.get(ch, ch) for ch in value) + '"'
