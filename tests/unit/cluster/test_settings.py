"""The replay's execution settings (--workers, --scheduler, --parts): every bad value refused with its own
message naming its flag, before anything runs and without importing dask; addresses read as Dask reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.cluster.settings import (
    CONNECT_TIMEOUT,
    Cluster,
    check_parts_url,
    cluster_of,
    parse_scheduler,
    parse_workers,
)
from rag_eval.core.errors import ConfigError
from tests.conftest import ROOT

WORKERS = "expected a whole number of worker processes from 1 to 256, got {!r} @ --workers"
SCHEDULER = "expected a Dask scheduler address such as tcp://host:8786, got {!r} @ --scheduler"


def refusal(call: object, *args: object, **kwargs: object) -> str:
    """The one problem a refused value gives, as the CLI prints it."""
    with pytest.raises(ConfigError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    assert caught.value.exit_code == 2 and len(caught.value.problems) == 1
    return str(caught.value.problems[0])


@pytest.mark.parametrize("text", ["0", "-3", "two", "2.5", "1e3", "", " ", "257", "1000000", "+4", "0x10", "²", "٣",
                                  "1_0"])  # fmt: skip
def test_a_bad_worker_count_is_refused_with_its_value(text: str) -> None:
    assert refusal(parse_workers, text) == WORKERS.format(text)


def test_a_worker_count_of_five_thousand_digits_is_refused_in_one_short_line() -> None:
    """More digits than ``int()`` converts: refused like any other count out of range, the value cut short."""
    text = "9" * 5_000
    shown = refusal(parse_workers, text)
    assert shown.startswith("expected a whole number of worker processes from 1 to 256, got '999") and len(shown) < 400


@pytest.mark.parametrize(("text", "workers"), [("1", 1), (" 4 ", 4), ("256", 256), ("007", 7), (3, 3)])
def test_a_worker_count_from_1_to_256_is_read(text: str | int, workers: int) -> None:
    assert parse_workers(text) == workers


@pytest.mark.parametrize(
    "text",
    [
        "not an address", "tcp://host:99999", "udp://host:8786", "tcp://host", "host", "tcp://:8786",
        "tcp://host:0", "tcp://host:port", "tcp://a:b:8786", "tcp://[::1]8786", "tcp://[::1", "inproc://x:1", "",
        "tcp://tcp://host:8786",
    ],
)  # fmt: skip
def test_a_bad_scheduler_address_is_refused_with_its_value(text: str) -> None:
    assert refusal(parse_scheduler, text) == SCHEDULER.format(text)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"), ("sched.local:8786", "tcp://sched.local:8786"),
        (" tls://sched:1 ", "tls://sched:1"), ("tcp://[::1]:8786", "tcp://[::1]:8786"), ("h:65535", "tcp://h:65535"),
    ],
)  # fmt: skip
def test_a_scheduler_address_is_read_with_tcp_by_default(text: str, address: str) -> None:
    assert parse_scheduler(text) == address


def dask_reading(text: str) -> str | None:
    """How ``--scheduler`` was read through ``distributed.comm.addressing`` (None: refused)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    value = text.strip()
    address = value if "://" in value else f"tcp://{value}"
    try:
        scheme, location = parse_address(address, strict=True)
        host, port = parse_host_port(location)
    except (ValueError, TypeError):
        return None
    if scheme not in ("tcp", "tls") or not host or not isinstance(port, int) or not 0 < port < 65536:
        return None
    return address


def our_reading(text: str) -> str | None:
    try:
        return parse_scheduler(text)
    except ConfigError:
        return None


@settings(deadline=None)  # the first example imports distributed
@given(st.text(alphabet="tcpls:/[]0189.ah -_", max_size=24))
def test_a_scheduler_address_is_read_as_dask_reads_it(text: str) -> None:
    assert our_reading(text) == dask_reading(text)


@pytest.mark.parametrize(
    "text", ["tcp://h:8786", "tls://[fe80::1]:9", "h:1", "[::1]:80", "tcp://h:08786", "tcp://h: 8786", "x:65536"]
)
def test_the_addresses_dask_reads_are_the_ones_read_here(text: str) -> None:
    assert our_reading(text) == dask_reading(text)


def test_a_parts_url_of_an_unknown_protocol_is_refused_and_a_directory_or_file_url_is_kept(tmp_path: Path) -> None:
    message = refusal(check_parts_url, "nosuchprotocol://bucket/x")
    assert message.startswith("not a usable path or fsspec URL 'nosuchprotocol://bucket/x': ")
    assert message.endswith(" @ --parts")
    assert check_parts_url(str(tmp_path)) == str(tmp_path)
    assert check_parts_url(f"file://{tmp_path}") == f"file://{tmp_path}"


def test_no_flag_means_this_process_and_the_flags_make_one_cluster() -> None:
    assert cluster_of(workers=None, scheduler=None, parts=None) is None
    assert cluster_of(workers="3", scheduler=None, parts=None) == Cluster(workers=3)
    assert cluster_of(workers=None, scheduler="s:8786", parts="/shared") == Cluster(
        scheduler="tcp://s:8786", parts_url="/shared", connect_timeout=CONNECT_TIMEOUT
    )


def test_flags_that_do_not_go_together_are_refused_before_their_values_are_read() -> None:
    alone = refusal(cluster_of, workers=None, scheduler=None, parts="/tmp/x")
    assert alone == "give --workers N or --scheduler ADDRESS with it @ --parts"
    both = refusal(cluster_of, workers="zero", scheduler="not an address", parts=None)
    assert both == "give --workers N (local processes) or --scheduler ADDRESS, not both @ --workers"
    # each value in turn: the first bad one is the one named
    assert refusal(cluster_of, workers="0", scheduler=None, parts="nosuchprotocol://x") == WORKERS.format("0")
    assert refusal(cluster_of, workers=None, scheduler="udp://h:1", parts="nosuchprotocol://x") == SCHEDULER.format(
        "udp://h:1"
    )
    assert refusal(cluster_of, workers="2", scheduler=None, parts="nosuchprotocol://x").endswith("@ --parts")


def test_the_settings_are_read_without_importing_dask() -> None:
    code = (
        "import sys\nfrom rag_eval.cluster.settings import cluster_of\n"
        "cluster_of(workers='2', scheduler=None, parts=None); cluster_of(workers=None, scheduler='h:1', parts=None)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"
