"""Milvus and gRPC failures as the project's own errors, by table: the first row that matches gives the error.

One table for both backends (the 2.3 server and Milvus Lite word and number the same failure differently), so
the exit code of a failure is decided in one place: a request Milvus refused is exit 2, a server that failed
without blaming the request exit 3. The table and how each kind of failure is read: docs/harness.md, "Errors
from Milvus".

>>> milvus_row(100, "collection not found[collection=kb]").error.__name__
'CollectionNotFoundError'
>>> milvus_row(65535, "channel not available").error.__name__
'SearchBackendError'
>>> grpc_row("UNIMPLEMENTED").error.__name__
'UnsupportedFeatureError'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rag_eval.core.errors import (
    CollectionNotFoundError,
    CollectionNotLoadedError,
    DimensionMismatchError,
    FilterError,
    LitePathError,
    RagEvalError,
    SearchBackendError,
    SearchRequestError,
    SearchUnavailableError,
    UnsupportedFeatureError,
    quoted,
)
from rag_eval.search.milvus.lazy import pymilvus
from rag_eval.search.milvus.schema import one_line


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """What is known where a call failed: the facts a row's message is written from."""

    uri: str  # redacted
    what: str  # the call, in words ("search", "create index")
    collection: str = "?"
    message: str = ""  # Milvus's own message, on one line
    budget: float | None = None  # the time that ran out, when it did
    status: str = ""  # the gRPC status code's name

    @property
    def why(self) -> str:
        return f"did not answer within {self.budget:g} s" if self.budget is not None else "is not reachable"


@dataclass(frozen=True, slots=True)
class Signal:
    """A Milvus error code, words of its message (all of them, lower case), or both."""

    code: int | None = None
    words: tuple[str, ...] = ()

    def matches(self, code: int | None, low: str) -> bool:
        return (self.code is None or code == self.code) and all(word in low for word in self.words)


def code(number: int, *words: str) -> Signal:
    """The error code ``number`` (and, when given, every one of ``words`` in the message)."""
    return Signal(number, words)


def says(*words: str) -> Signal:
    """Every one of ``words`` in the message, whatever the code."""
    return Signal(None, words)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One row of a table: the project's error, its message template, and the signals (any one) it matches."""

    error: type[RagEvalError]
    message: str
    when: tuple[Signal, ...] = ()

    def matches(self, code: int | None, low: str) -> bool:
        return any(signal.matches(code, low) for signal in self.when)

    def build(self, failure: Failure) -> RagEvalError:
        f = failure
        text = self.message.format(
            uri=f.uri, what=f.what, name=quoted(f.collection), message=f.message, why=f.why, status=f.status
        )
        attrs: dict[str, Any] = {"uri": f.uri}
        if issubclass(self.error, (CollectionNotFoundError, CollectionNotLoadedError)):
            attrs["collection"] = f.collection
        elif issubclass(self.error, UnsupportedFeatureError):
            attrs["feature"] = f.what
        elif issubclass(self.error, LitePathError):
            attrs = {"path": f.uri}
        return self.error(text, **attrs)


# words with which Milvus says the request itself is wrong (everything else from a live server is its failure)
INPUT_WORDS: Final = (
    "invalid",
    "illegal",
    "must be",
    "should be",
    "exceed",
    "out of range",
    "not supported",
    "unsupported",
    "param",
    "syntax",
    "mismatch",
    "wrong",
)

UNAVAILABLE: Final = Row(
    error=SearchUnavailableError,
    message="Milvus at {uri} {why} ({what}): start the server or check --milvus-uri",
    when=(code(2), says("fail connecting"), says("retry timeout"), says("retry run out")),
)
UNIMPLEMENTED: Final = Row(
    error=UnsupportedFeatureError,
    message="Milvus at {uri} does not implement {what}: use a backend that offers it "
    "(Milvus Lite, or a server >= 2.5) or another search mode",
)
GRPC_OTHER: Final = Row(
    error=SearchUnavailableError, message="Milvus at {uri} failed {what} ({status}): check the server's health and logs"
)
BAD_URI: Final = Row(error=SearchUnavailableError, message="cannot open Milvus at {uri}: {message}: check --milvus-uri")
NOT_FOUND: Final = Row(
    error=CollectionNotFoundError,
    message="collection {name} does not exist in Milvus at {uri}: ingest the data set first or check "
    "the collection name",
    when=(code(100), says("collection not found"), says("does not exist"), says("can't find collection")),
)
NOT_LOADED: Final = Row(
    error=CollectionNotLoadedError,
    message="collection {name} in Milvus at {uri} is not loaded: load it (rag_eval loads on open "
    "unless told not to) or re-run ingest",
    when=(code(101), says("not loaded"), says("state 'released'")),
)
NO_INDEX: Final = Row(
    error=CollectionNotLoadedError,
    message="collection {name} in Milvus at {uri} has no index: finish ingest (finalize) first",
    when=(code(700), says("index not found")),
)
BAD_FILTER: Final = Row(
    error=FilterError,
    message="Milvus at {uri} refused the filter ({message}): fix the filter value",
    when=(says("cannot parse expression"), code(6, "column")),
)
WRONG_DIMENSION: Final = Row(
    error=DimensionMismatchError,
    message="vector dimension does not match collection {name} ({message}): embed with the model used at ingest",
    when=(says("sizeof"), says("dim", "mismatch"), says("dim", "should divide"), says("dim", "expected dim")),
)
REFUSED: Final = Row(
    error=SearchRequestError,
    message="Milvus at {uri} refused {what} on {name}: {message}",
    when=(code(1100), *(says(word) for word in INPUT_WORDS)),
)
BACKEND_FAILED: Final = Row(
    error=SearchBackendError,
    message="Milvus at {uri} failed {what} on {name}: {message}: check the server's health and logs",
)

LITE_LOCKED: Final = Row(
    error=SearchUnavailableError,
    message="Milvus Lite could not open {uri} ({message}): only one process at a time can use a Lite file, "
    "close the other one or use a Milvus server",
)
LITE_PATH: Final = Row(error=LitePathError, message="Milvus Lite cannot use it as a database ({message})")
LITE_FAILED: Final = Row(error=SearchUnavailableError, message="Milvus Lite could not open {uri} ({message})")
# why Milvus Lite did not open its path, by the exception's class name (in its MRO), else LITE_FAILED
LITE_ROWS: Final = (
    ("DataDirLockedError", LITE_LOCKED),
    *((name, LITE_PATH) for name in ("PermissionError", "FileExistsError", "NotADirectoryError", "IsADirectoryError")),
)

# a raw gRPC error, by its status code's name (None: an RpcError that carries no code)
GRPC_ROWS: Final[Mapping[str | None, Row]] = {
    "UNIMPLEMENTED": UNIMPLEMENTED,
    "UNAVAILABLE": UNAVAILABLE,
    "DEADLINE_EXCEEDED": UNAVAILABLE,
    None: UNAVAILABLE,
}
# a pymilvus exception by the name of its class in pymilvus.exceptions, before its code is read
TYPE_ROWS: Final = (("ConnectionConfigException", BAD_URI),)
# any other MilvusException: the first row whose signals match, else BACKEND_FAILED
MILVUS_ROWS: Final = (UNAVAILABLE, NOT_FOUND, NOT_LOADED, NO_INDEX, BAD_FILTER, WRONG_DIMENSION, REFUSED)


def milvus_row(code: int | None, message: str) -> Row:
    """The row of :data:`MILVUS_ROWS` a Milvus error code and message fall under (else :data:`BACKEND_FAILED`)."""
    low = message.lower()
    return next((row for row in MILVUS_ROWS if row.matches(code, low)), BACKEND_FAILED)


def lite_failure(exc: BaseException | None, reason: str, *, path: str) -> RagEvalError:
    """The project's error for Milvus Lite failing to open ``path``: ``exc`` is what it logged (None when it
    logged no exception), ``reason`` its words on one line.

    >>> str(lite_failure(FileExistsError(17, "File exists"), "[Errno 17] File exists", path="/x/m.db"))
    '/x/m.db: Milvus Lite cannot use it as a database ([Errno 17] File exists)'
    """
    names = {cls.__name__ for cls in type(exc).__mro__} if exc is not None else set()
    row = next((row for name, row in LITE_ROWS if name in names), LITE_FAILED)
    return row.build(Failure(uri=path, what="open", message=reason))


def grpc_row(status: str | None) -> Row:
    """The row of :data:`GRPC_ROWS` for a gRPC status code's name (else :data:`GRPC_OTHER`)."""
    return GRPC_ROWS.get(status, GRPC_OTHER)


def row_for(exc: BaseException) -> Row | None:
    """The row a pymilvus or gRPC exception falls under (None: not a Milvus error)."""
    import grpc

    pm = pymilvus()
    if isinstance(exc, grpc.RpcError):
        return grpc_row(_status(exc))
    if not isinstance(exc, pm.MilvusException):
        return None
    for type_name, row in TYPE_ROWS:
        if isinstance(exc, getattr(pm.exceptions, type_name)):
            return row
    return milvus_row(exc.code, _message(exc))


def translate(
    exc: BaseException, what: str, *, uri: str, collection: str | None = None, budget: float | None = None
) -> RagEvalError | None:
    """The project's error for a pymilvus or gRPC exception (None: not a Milvus error).

    ``uri`` is the redacted URI; ``budget`` the time that ran out, when it did (otherwise the server
    refused to talk at once).
    """
    row = row_for(exc)
    if row is None:
        return None
    failure = Failure(
        uri=uri,
        what=what,
        collection=collection or "?",
        message=_message(exc),
        budget=budget,
        status=_status(exc) or "",
    )
    return row.build(failure)


def _status(exc: BaseException) -> str | None:
    """A gRPC error's status code by name (None for any other error, or an RpcError without a code)."""
    import grpc

    code = exc.code() if isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None)) else None
    return code.name if code is not None else None


def _message(exc: BaseException) -> str:
    return one_line(getattr(exc, "message", exc))
