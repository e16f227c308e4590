"""``rag-eval inspect URI [--collection NAME]``: what a Milvus holds, and how to replay one of its collections.

Without a collection: what answers at the URI and its collections. With one: its schema, index (type,
metric, parameters), row count, load state, a few rows and a suggested ``[collection]`` table. Read only:
a Lite file that is not there is refused (opening it would create one), a server's collection that is not
loaded is described without rows unless ``--load`` allows loading it (a Lite file's collections are loaded
to be read: their load state never outlives the process).
"""

from __future__ import annotations

from rag_eval.core.errors import CollectionNotFoundError, CollectionNotLoadedError, ConfigError, ConfigProblem
from rag_eval.search.milvus.existing import ForeignCollection, collections_at
from rag_eval.search.milvus.lite import read_only_problem
from rag_eval.search.milvus.schema import SearchTarget, uri_problem
from rag_eval.search.milvus.suggest import Inspected, suggest

MAX_ROWS = 50  # sample rows inspect shows at most


def _refuse(key: str, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(key, message)])


def inspect(uri: str, collection: str | None, *, load: bool, rows: int, token_env: str) -> Inspected:
    """See the module docstring; every problem with the arguments is a ConfigError naming the argument."""
    if why := uri_problem(uri):
        raise _refuse("URI", why)
    if not 0 <= rows <= MAX_ROWS:
        raise _refuse("--rows", f"must be from 0 to {MAX_ROWS}, got {rows}")
    base = SearchTarget(uri=uri, index=None, token_env=token_env)
    if not base.is_server and (why := read_only_problem(uri)):
        raise _refuse("URI", f"{uri} {why}")
    backend, names = collections_at(base)
    if collection is None:
        return Inspected(target=base, backend=backend, collections=tuple(names))
    if collection not in names:
        shown = ", ".join(names) or "none"
        raise _refuse("--collection", f"{base.redacted_uri} has no collection {collection!r} (collections: {shown})")
    target = base.named(collection)
    may_load = load or not base.is_server
    try:
        with ForeignCollection(target, load=may_load) as coll:
            samples = coll.sample(max(rows, 20))
            suggestion = suggest(coll.info, samples)
            return Inspected(target=target, backend=backend, collections=tuple(names), info=coll.info,
                             samples=samples[:rows], suggestion=suggestion, load_default=may_load)  # fmt: skip
    except CollectionNotLoadedError:
        with ForeignCollection(target, load=False, describe_only=True) as coll:
            return Inspected(target=target, backend=backend, collections=tuple(names), info=coll.info)
    except CollectionNotFoundError as exc:
        raise _refuse("--collection", str(exc)) from exc
