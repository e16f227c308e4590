"""A mutant's test process, forked from one that used a forkserver, gets one of its own (tests/conftest.py)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.conftest import reset_forkserver


def _in_a_forked_child(reset: bool) -> str:
    """What a process pool on the forkserver gives in a child forked after the parent used it."""
    ctx = multiprocessing.get_context("forkserver")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running anything of pytest's
        os.close(read)
        try:
            if reset:
                reset_forkserver()
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                outcome = "child pid" if pool.submit(os.getpid).result(timeout=60) != os.getpid() else "same pid"
        except BaseException as exc:  # reported to the parent
            outcome = type(exc).__name__
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 120  # a child stuck on a lock some other thread held at the fork: killed
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
            return "stuck"
        time.sleep(0.05)
    with os.fdopen(read, "rb") as got:
        return got.read().decode()


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here")
def test_a_forked_process_needs_a_forkserver_of_its_own() -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
        pool.submit(os.getpid).result(timeout=60)  # this process's forkserver runs
    assert _in_a_forked_child(reset=False) == "ChildProcessError"  # what killed every mutant the load test reaches
    assert _in_a_forked_child(reset=True) == "child pid"
