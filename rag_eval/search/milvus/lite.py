"""What a Milvus Lite path names on disk, read before Milvus Lite is given it.

A Milvus Lite 3.2 database is a directory (``LOCK``, ``collections/``, ``databases/``: see
``milvus_lite.db``); Milvus Lite makes it when the path is new. Given anything else it fails with an OS
error whose words do not say what is wrong (``File exists`` for a file, ``Not a directory`` below a
file), or, given a directory of someone else's files, writes its own among them. So the path is read
first, by :func:`lite_path_problem`, and whatever is not a new path, an empty directory or a Lite database
is refused with what it is: the experiment's checks read it before anything runs (naming ``milvus.uri``
or ``--milvus-uri``), and :class:`~rag_eval.search.milvus.connection.Connection` again before it opens
the path (:class:`~rag_eval.core.errors.LitePathError`, exit 2).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> lite_path_problem(str(d / "new.db")) is None, lite_path_problem(str(d)) is None
(True, True)
>>> _ = (d / "notes.txt").write_text("mine")
>>> lite_path_problem(str(d / "notes.txt"))
'is a file (4 bytes), not a Milvus Lite database (a directory): name a new path or a Lite database'
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from rag_eval.core.errors import as_written

LITE_MARK: Final = "collections"  # the directory Milvus Lite makes first in a database (milvus_lite.db)
_KINDS: Final = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_ADVICE: Final = "name a new path or a Lite database"


def lite_path(uri: str) -> Path:
    """The absolute path Milvus Lite is given for ``uri`` (relative to the working directory)."""
    return Path(uri).expanduser().absolute()


def lite_path_problem(uri: str) -> str | None:
    """What is wrong with ``uri`` as a Milvus Lite database, or None: a new path (its parents may be new
    too), an empty directory, or a Lite database's directory."""
    path = lite_path(uri)
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        if path.is_symlink():
            return f"is a symbolic link to {as_written(os.readlink(path))}, which does not exist: {_ADVICE}"
        return _parent_problem(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISDIR(info.st_mode):
        return _directory_problem(path)
    if stat.S_ISREG(info.st_mode):
        return f"is a file ({info.st_size:,} bytes), not a Milvus Lite database (a directory): {_ADVICE}"
    kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file or directory")
    return f"is {kind}, not a Milvus Lite database: {_ADVICE}"


def read_only_problem(uri: str) -> str | None:
    """What is wrong with ``uri`` as a Milvus Lite database that is only read (``inspect``, a collection built
    elsewhere), or None: it must be there already, since opening a path that holds none creates one."""
    path = lite_path(uri)
    if not path.exists() and not path.is_symlink():
        return "holds no Milvus Lite database: it is read, never created (build the collection first)"
    if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
        return "is an empty directory, not a Milvus Lite database: it is read, never created (build the collection " \
            "first)"
    return lite_path_problem(uri)


def private_copy(path: Path) -> Path:
    """A copy of the Lite database ``path`` in a new temporary directory, for a reader to open: Milvus Lite
    writes into whatever it opens (it builds an index file when a collection is loaded, replays and trims its
    log), so a database that is only read is never given to it. The copy is made under a shared lock on the
    database's ``LOCK`` (Milvus Lite holds it exclusively while a process has the database open), so it is
    never a half-written state; a database another process holds raises :class:`BlockingIOError`. The
    caller removes the copy's directory (``copy.parent``).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "m.db"
    >>> _ = (d / "collections").mkdir(parents=True), (d / "LOCK").write_text(""), (d / "schema.json").write_text("{}")
    >>> copy = private_copy(d)
    >>> sorted(p.name for p in copy.iterdir()), copy.name, copy.parent != d.parent
    (['collections', 'schema.json'], 'm.db', True)
    >>> shutil.rmtree(copy.parent)
    """
    into = Path(tempfile.mkdtemp(prefix="rag-eval-lite-read-"))
    try:
        with _shared_lock(path / "LOCK"):
            shutil.copytree(path, into / path.name, symlinks=True, ignore=shutil.ignore_patterns("LOCK"))
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise
    return into / path.name


@contextmanager
def _shared_lock(path: Path) -> Iterator[None]:
    """A shared ``flock`` on ``path``, opened read-only (its bytes untouched); none when there is no such file."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _directory_problem(path: Path) -> str | None:
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not names or (path / LITE_MARK).is_dir():
        return None
    shown = ", ".join(as_written(n) for n in names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
    return (
        f"is a directory that is not a Milvus Lite database (it holds {shown} and no {LITE_MARK}/): Milvus Lite "
        f"would write its files among them; {_ADVICE} or an empty directory"
    )


def _parent_problem(path: Path) -> str | None:
    """A new path can be made when its nearest existing ancestor is a directory."""
    for parent in path.parents:
        try:
            info = parent.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return f"cannot be made: {parent} cannot be read ({exc.strerror})"
        return None if stat.S_ISDIR(info.st_mode) else f"cannot be made: {parent} is a file, not a directory"
    return None
