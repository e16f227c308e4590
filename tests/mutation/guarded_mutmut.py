"""``mutmut run``, its wall-clock timeouts sent only to the process each was set for.

mutmut 3.8.1 times a mutant's tests by sending SIGXCPU to the child's PID when its wall-clock limit passes,
and keeps the timeouts of children that ended long before (``mutmut/workers/timeout.py`` says so). A PID is
used again once the kernel's counter wraps (here ``pid_max`` is 32,768 and threads take from the same
counter: it wrapped every 40 s or so during a run), so a stale timeout killed whatever process had its PID
by then: another mutant's tests (counted as a timeout, that is as killed), mutmut's own processes (``mutmut
failed (exit -24)``), or a command run beside it. Here each timeout also records the process's start time
(``/proc/<pid>/stat``), and SIGXCPU goes only to the process that still has both.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import signal
import sys
import time
from threading import Condition, Thread

from mutmut.workers import isolation, timeout

_heap: list[tuple[float, int, bytes]] = []  # (deadline, pid, the process's start time)
_lock = Condition()
_started = False


def started(pid: int) -> bytes | None:
    """The start time of process ``pid`` (field 22 of ``/proc/<pid>/stat``, in clock ticks since boot), or
    None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()  # after the command's name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def register_timeout(pid: int, timeout_s: float) -> None:
    """mutmut's ``register_timeout``, remembering which process ``pid`` is now."""
    global _started
    born = started(pid)
    if born is None:  # already gone: nothing to time out
        return
    with _lock:
        if not _started:
            _started = True
            Thread(target=_checker, name=f"{os.getpid()}-guarded-timeouts", daemon=True).start()
        heapq.heappush(_heap, (time.time() + timeout_s, pid, born))
        _lock.notify()


def _checker() -> None:
    with _lock:
        while True:
            while not _heap:
                _lock.wait()
            now = time.time()
            while _heap and _heap[0][0] <= now:
                _, pid, born = heapq.heappop(_heap)
                if started(pid) == born:  # the same process, still running past its limit
                    with contextlib.suppress(ProcessLookupError):  # ended just now
                        os.kill(pid, signal.SIGXCPU)
            if _heap:
                _lock.wait(timeout=max(0.0, _heap[0][0] - now))


def main() -> None:
    timeout.register_timeout = register_timeout
    isolation.register_timeout = register_timeout  # imported by name there
    # this module was imported as part of the repository's `tests` package: forget that package, so that the
    # mutants' test runs import `tests` from mutmut's copy (mutants/), as under `python -m mutmut`
    for name in [n for n in sys.modules if n == "tests" or n.startswith("tests.")]:
        del sys.modules[name]
    from mutmut.__main__ import cli

    sys.argv = ["mutmut", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
