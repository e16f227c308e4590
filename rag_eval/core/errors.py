"""Every error rag_eval raises, in one tree.

Two branches under :class:`RagEvalError` decide the exit code: :class:`InputError` (exit 2: something the
user wrote is wrong) and :class:`InfrastructureError` (exit 3: the environment failed, the input may be fine).
Messages are one sentence that says what to do, the details in attributes; every error pickles, so a worker
process can raise it and the driver report it. The whole tree: docs/harness.md, "The error tree".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_QUOTED = 200  # characters of a user's value quoted in a message


def quoted(value: object, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for a message: whole when it fits in ``limit`` characters, else cut there, saying
    how long the value was.

    >>> quoted("rag.retrieve-k"), quoted(["a", 1])
    ("'rag.retrieve-k'", "['a', 1]")
    >>> quoted("a" * 52_428_800, 12)
    "'aaaaaaaaa…' (52,428,800 characters)"
    >>> quoted(list(range(10_000)), 12)
    '[0, 1, 2, 3… (58,890 characters)'
    """
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text):,} characters)"
    keep = min(len(value), limit)
    head = repr(value[:keep])
    if keep == len(value) and len(head) <= limit:
        return head
    while len(head) > limit - 1 and keep > 0:  # escapes (\x00, \n) make a repr longer than its string
        keep = min(keep - 1, keep * (limit - 1) // len(head))
        head = repr(value[:keep])
    return f"{head[:-1]}…{head[-1]} ({len(value):,} characters)"


def as_written(text: str) -> str:
    """Text the user wrote shown unquoted (a problem's key, a URI): as written when it fits in
    :data:`MAX_QUOTED` characters, else :func:`quoted`.

    >>> as_written("rag.retreive-k"), as_written("k" * 300)[-22:]
    ('rag.retreive-k', "kkk…' (300 characters)")
    """
    return text if len(text) <= MAX_QUOTED else quoted(text)


class RagEvalError(Exception):
    """Base of every error raised on purpose by rag_eval.

    >>> import pickle
    >>> err = pickle.loads(pickle.dumps(RunStoreError("cannot write a batch", path="/runs/x")))
    >>> str(err), err.path, err.exit_code
    ('/runs/x: cannot write a batch', '/runs/x', 3)
    """

    exit_code: int = 1

    def __reduce__(self) -> tuple[object, ...]:
        # the default rebuilds from ``args`` alone, which keyword-only attributes cannot survive
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(cls: type[RagEvalError], args: tuple[object, ...], state: dict[str, object]) -> RagEvalError:
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class InputError(RagEvalError):
    """Something the user wrote (config, data set, experiment, request) is wrong: exit 2."""

    exit_code = 2


class InfrastructureError(RagEvalError):
    """The environment failed (Milvus unreachable, disk): exit 3."""

    exit_code = 3


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One configuration problem: ``key`` is the property or table path it belongs to."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.message} @ {self.key}"


class ConfigError(InputError):
    """Configuration is invalid; ``problems`` lists every problem found, not just the first."""

    def __init__(self, problems: Iterable[ConfigProblem], *, path: str | None = None) -> None:
        self.problems = tuple(problems)
        self.path = path
        where = f"{path}: " if path else ""
        listed = "; ".join(str(p) for p in self.problems)
        n = len(self.problems)
        super().__init__(f"{where}{n} configuration problem{'s' if n != 1 else ''}: {listed}")


class DatasetError(InputError):
    """A data set file is malformed; names the file, the line (1-based) and the field."""

    def __init__(self, message: str, *, path: str, line: int | None = None, field: str | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.field = field
        where = path if line is None else f"{path}:{line}"
        if field:
            where += f": field {field!r}"
        super().__init__(f"{where}: {message}")


class EmbeddingMismatchError(InputError):
    """Precomputed vectors do not belong to the chunks or queries they claim to embed."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class EmbedderUnavailableError(InputError):
    """Some texts have no stored vector and the embedding model cannot be loaded here."""


class EmbedderRequestError(InputError):
    """An embedding endpoint refused a request for a reason retrying cannot change (HTTP 400, 401, 403, 404,
    422: the model, the key, the input); ``endpoint`` is its URL without credentials."""

    def __init__(self, message: str, *, endpoint: str) -> None:
        self.endpoint = endpoint
        super().__init__(message)


class SearchRequestError(InputError):
    """The search backend refused a request as malformed."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        self.uri = uri
        super().__init__(message)


class DimensionMismatchError(SearchRequestError):
    """The query vector dimension differs from the collection's vector field."""


class FilterError(SearchRequestError):
    """The filter expression was refused by the backend."""


class UnsupportedFeatureError(InputError):
    """The backend does not offer a feature, or would silently ignore it."""

    def __init__(self, message: str, *, feature: str, uri: str | None = None) -> None:
        self.feature = feature
        self.uri = uri
        super().__init__(message)


class LitePathError(InputError):
    """A Milvus Lite path names something Milvus Lite cannot use as a database: a file, a directory of other
    files, a path below a file, one that cannot be read. Names the path and what it is."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class ReportInputError(InputError):
    """A file a report is rendered from is missing or not what it claims to be; names file and field."""

    def __init__(self, message: str, *, path: str, field: str | None = None) -> None:
        self.message = message
        self.path = path
        self.field = field
        where = f"{path}: field {field!r}" if field else path
        super().__init__(f"{where}: {message}")


class GatesError(InputError):
    """A gates file or one of its checks is wrong; names the file, the line (1-based) and the check."""

    def __init__(self, message: str, *, path: str, line: int | None = None, check: str | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.check = check
        where = path if line is None else f"{path}:{line}"
        if check:
            where += f": check {quoted(check)}"
        super().__init__(f"{where}: {message}")


class RunDirectoryError(InputError):
    """A run directory cannot be compared: missing files, unreadable, or over different data or queries."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class SearchUnavailableError(InfrastructureError):
    """The search backend could not be reached, or did not answer in time."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        self.uri = uri
        super().__init__(message)


class SearchBackendError(InfrastructureError):
    """A reachable Milvus failed a request with an error that does not say the request was wrong
    (a frozen query node, "channel not available", an internal error): infrastructure, not input."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        self.uri = uri
        super().__init__(message)


class CollectionNotFoundError(InfrastructureError):
    def __init__(self, message: str, *, collection: str, uri: str | None = None) -> None:
        self.collection = collection
        self.uri = uri
        super().__init__(message)


class CollectionNotLoadedError(InfrastructureError):
    def __init__(self, message: str, *, collection: str, uri: str | None = None) -> None:
        self.collection = collection
        self.uri = uri
        super().__init__(message)


class CollectionChangedError(InfrastructureError):
    """The collection a run searched changed while it ran (rows inserted or deleted): its rows measure no one
    state of it, so nothing is published."""

    def __init__(self, message: str, *, collection: str, uri: str | None = None) -> None:
        self.collection = collection
        self.uri = uri
        super().__init__(message)


class RunStoreError(InfrastructureError):
    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class EmbeddingEndpointError(InfrastructureError):
    """An embedding endpoint could not be reached, timed out or kept failing (429, 5xx) after every retry;
    ``endpoint`` is its URL without credentials."""

    def __init__(self, message: str, *, endpoint: str) -> None:
        self.endpoint = endpoint
        super().__init__(message)


class LoadClientError(InfrastructureError):
    """A client process of a load measurement died (killed, out of memory) or never reached the start."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        self.uri = uri
        super().__init__(message)


class ClusterError(InfrastructureError):
    """The Dask scheduler a replay was sent to cannot be reached, has no workers, or lost a worker."""

    def __init__(self, message: str, *, address: str | None = None) -> None:
        self.address = address
        super().__init__(message)


class ServiceError(InfrastructureError):
    """A deployed ``lookup_knowledge`` endpoint replayed by a run timed out, answered with an error or with
    something that is not a payload, or stopped answering; ``endpoint`` is where it is (no credentials)."""

    def __init__(self, message: str, *, endpoint: str) -> None:
        self.endpoint = endpoint
        super().__init__(message)
