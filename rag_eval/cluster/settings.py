"""Where a run's replay executes: in its own process, or on Dask workers (``--workers``, ``--scheduler``,
``--parts``). The flags' values are parsed and checked here, before anything runs, without dask: a bad
value is a :class:`~rag_eval.core.errors.ConfigError` naming its flag (exit 2, one line).

>>> parse_workers("4"), parse_scheduler("tcp://10.0.0.5:8786"), parse_scheduler("scheduler.local:8786")
(4, 'tcp://10.0.0.5:8786', 'tcp://scheduler.local:8786')
>>> for bad in ("0", "-2", "1.5", "many", "100000"):
...     try:
...         parse_workers(bad)
...     except ConfigError as exc:
...         print(exc.problems[0])
expected a whole number of worker processes from 1 to 256, got '0' @ --workers
expected a whole number of worker processes from 1 to 256, got '-2' @ --workers
expected a whole number of worker processes from 1 to 256, got '1.5' @ --workers
expected a whole number of worker processes from 1 to 256, got 'many' @ --workers
expected a whole number of worker processes from 1 to 256, got '100000' @ --workers
>>> cluster_of(workers=None, scheduler=None, parts=None) is None  # no flag: the replay runs in this process
True
>>> cluster_of(workers="2", scheduler=None, parts="/shared/parts")
Cluster(workers=2, scheduler=None, parts_url='/shared/parts', connect_timeout=10.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_eval.core.errors import ConfigError, ConfigProblem, quoted
from rag_eval.core.parsing import ascii_int

MAX_WORKERS = 256  # local worker processes; a larger cluster is a scheduler's (--scheduler)
CONNECT_TIMEOUT = 10.0  # seconds to reach a scheduler, and for a scheduler's first worker
SCHEMES = ("tcp", "tls")  # the Dask comms a scheduler address may name


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """Where a replay's batches run: ``workers`` local processes, or the workers of ``scheduler``.

    >>> Cluster(workers=2).label(), Cluster(scheduler="tcp://h:8786").label()
    ('2 local worker processes (Dask LocalCluster)', 'the workers of the Dask scheduler at tcp://h:8786')
    """

    workers: int | None = None
    scheduler: str | None = None
    parts_url: str | None = None  # where workers write parts; None: the run directory's .parts
    connect_timeout: float = CONNECT_TIMEOUT

    def label(self) -> str:
        if self.scheduler is not None:
            return f"the workers of the Dask scheduler at {self.scheduler}"
        n = self.workers or 1
        return f"{n} local worker process{'es' if n != 1 else ''} (Dask LocalCluster)"


def cluster_of(*, workers: str | None, scheduler: str | None, parts: str | None) -> Cluster | None:
    """The cluster the flags ask for (None: replay in this process), every value checked."""
    if workers is None and scheduler is None:
        if parts is not None:
            raise _refused("--parts", "give --workers N or --scheduler ADDRESS with it")
        return None
    if workers is not None and scheduler is not None:
        raise _refused("--workers", "give --workers N (local processes) or --scheduler ADDRESS, not both")
    return Cluster(
        workers=parse_workers(workers) if workers is not None else None,
        scheduler=parse_scheduler(scheduler) if scheduler is not None else None,
        parts_url=check_parts_url(parts) if parts is not None else None,
    )


def parse_workers(text: str | int) -> int:
    """``--workers``: a whole number of local worker processes, 1 to :data:`MAX_WORKERS`."""
    value = ascii_int(str(text))
    if value is None or not 1 <= value <= MAX_WORKERS:
        expected = f"expected a whole number of worker processes from 1 to {MAX_WORKERS}"
        raise _refused("--workers", f"{expected}, got {quoted(str(text))}")
    return value


def parse_scheduler(text: str) -> str:
    """``--scheduler``: a Dask scheduler address, ``[tcp|tls]://host:port`` (``host:port`` means tcp).

    Read as Dask reads an address (``distributed.comm.addressing``), without importing it: the scheme
    before the last ``://``, then ``host:port`` or ``[ipv6]:port``.

    >>> parse_scheduler("tls://[::1]:8786"), parse_scheduler(" h:1 ")
    ('tls://[::1]:8786', 'tcp://h:1')
    """
    value = text.strip()
    address = value if "://" in value else f"tcp://{value}"
    scheme, _, location = address.rpartition("://")
    host, port = _host_port(location)
    if scheme not in SCHEMES or not host or port is None or not 0 < port < 65536:
        raise _refused("--scheduler", f"expected a Dask scheduler address such as tcp://host:8786, got {text!r}")
    return address


def _host_port(location: str) -> tuple[str, int | None]:
    """``host:port`` or ``[ipv6]:port`` as Dask splits it; port None where Dask would refuse it."""
    if location.startswith("["):
        host, bracket, tail = location[1:].partition("]")
        if not bracket or not tail.startswith(":"):
            return host, None
        port = tail[1:]
    else:
        host, colon, port = location.rpartition(":")
        if not colon or ":" in host:
            return host, None
    try:
        return host, int(port)
    except ValueError:
        return host, None


def check_parts_url(url: str) -> str:
    """``--parts``: a local directory or an fsspec URL the workers and the driver both reach (its protocol
    known to fsspec and importable here)."""
    import fsspec

    try:
        fsspec.core.url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise _refused("--parts", f"not a usable path or fsspec URL {url!r}: {exc}") from None
    return url


def _refused(flag: str, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(flag, message)])
