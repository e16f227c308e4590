"""The mutation run's timeouts reach only the process each was set for (tests/mutation/guarded_mutmut.py)."""

from __future__ import annotations

import heapq
import subprocess
import sys
import time

import pytest

from tests.mutation import guarded_mutmut


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


def test_a_process_past_its_limit_gets_sigxcpu() -> None:
    proc = _sleeper()
    try:
        guarded_mutmut.register_timeout(proc.pid, 0.2)
        assert proc.wait(timeout=10) == -24  # SIGXCPU
    finally:
        proc.kill()


def test_a_timeout_outlived_by_its_process_spares_the_process_that_has_its_pid_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel gives an ended process's PID to another: that one is not signalled (its start time differs)."""
    first = _sleeper()
    time.sleep(0.1)  # start times count clock ticks (a hundredth of a second): the second starts later
    second = _sleeper()
    try:
        born = guarded_mutmut.started(first.pid)
        assert born is not None and guarded_mutmut.started(second.pid) not in (None, born)
        real = guarded_mutmut.started
        # as if `first` had ended and `second` had been given its PID: that PID's start time is now second's
        monkeypatch.setattr(guarded_mutmut, "started", lambda pid: real(second.pid) if pid == first.pid else real(pid))
        third = _sleeper()
        guarded_mutmut.register_timeout(third.pid, 300)  # starts the checker if it is not running yet
        third.kill()  # its timeout stays behind, spared by the same rule when it comes due
        with guarded_mutmut._lock:
            heapq.heappush(guarded_mutmut._heap, (time.time(), first.pid, born))
            guarded_mutmut._lock.notify()
        time.sleep(0.5)
        assert first.poll() is None and second.poll() is None
    finally:
        first.kill()
        second.kill()
    assert guarded_mutmut.started(2**22 + 7) is None  # no such process
