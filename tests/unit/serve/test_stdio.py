"""The stdio transport's input: lines as the SDK's reader gives them, read in the event loop so that a stop ends a
read waiting on an idle pipe at once, and an end (stop or end of input) that waits for the requests already read
to be answered, at most the grace period."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from rag_eval.serve.stdio import StdinLines


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def _request(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {}}).encode() + b"\n"


async def _all(lines: StdinLines) -> list[str]:
    return [line async for line in lines]


def test_lines_keep_their_newline_and_the_last_one_comes_without(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b'{"a": 1}\n\n{"b": "\xc3\xa9"}\nbroken \xff\nlast')
    os.close(write_end)
    got = anyio.run(_all, StdinLines(read_end, grace=1.0))
    assert got == ['{"a": 1}\n', "\n", '{"b": "é"}\n', "broken \ufffd\n", "last"]


def test_a_character_split_between_two_reads_is_whole(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe

    async def main() -> list[str]:
        lines = StdinLines(read_end, grace=1.0)
        first = b'{"q": "\xc3'
        os.write(write_end, first)
        async with anyio.create_task_group() as tasks:
            got: list[str] = []

            async def collect() -> None:
                got.extend(await _all(lines))

            tasks.start_soon(collect)
            await anyio.sleep(0.05)
            os.write(write_end, b'\xa9"}\n')
            os.close(write_end)
        return got

    assert anyio.run(main) == ['{"q": "é"}\n']


def test_stop_ends_a_read_waiting_on_an_idle_pipe_at_once(pipe: tuple[int, int]) -> None:
    read_end, _ = pipe  # the writer stays open and silent: a blocking read would never return

    async def main() -> list[str]:
        lines = StdinLines(read_end, grace=30.0)
        got: list[str] = []
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tasks:

                async def collect() -> None:
                    got.extend(await _all(lines))

                tasks.start_soon(collect)
                await anyio.sleep(0.05)
                lines.stop()
        return got

    assert anyio.run(main) == []


def test_after_stop_the_complete_lines_already_read_still_come_then_nothing_more(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b'{"n": 1}\n{"n": 2}\n{"n": 3')

    async def main() -> list[str]:
        lines = StdinLines(read_end, grace=1.0)
        first = await lines.__anext__()
        lines.stop()
        os.write(write_end, b'}\n{"n": 4}\n')  # after the stop: not read
        return [first, *await _all(lines)]

    assert anyio.run(main) == ['{"n": 1}\n', '{"n": 2}\n']


@pytest.mark.parametrize("ending", ["stop", "end of input"])
def test_the_end_waits_for_the_requests_read_to_be_answered(pipe: tuple[int, int], ending: str) -> None:
    read_end, write_end = pipe
    os.write(write_end, _request(7) + _request(8) + b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
             + b'{"jsonrpc": "2.0", "id": 99, "result": {}}\n')  # fmt: skip
    if ending == "end of input":
        os.close(write_end)

    async def main() -> tuple[list[int], float]:
        lines = StdinLines(read_end, grace=30.0)
        read = [await lines.__anext__() for _ in range(4)]
        assert [json.loads(line).get("id") for line in read] == [7, 8, None, 99]
        if ending == "stop":
            lines.stop()
        order: list[int] = []
        started = anyio.current_time()
        async with anyio.create_task_group() as tasks:

            async def drain() -> None:
                assert await _all(lines) == []
                order.append(0)

            tasks.start_soon(drain)
            for request_id in (8, 7):  # a notification and a response to the server's own request await nothing
                await anyio.sleep(0.1)
                order.append(request_id)
                lines.answered(request_id)
        return order, anyio.current_time() - started

    order, took = anyio.run(main)
    assert order == [8, 7, 0] and took < 5


def test_the_end_waits_no_longer_than_the_grace_period(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, _request(1))

    async def main() -> float:
        lines = StdinLines(read_end, grace=0.3)
        await lines.__anext__()
        lines.stop()
        started = anyio.current_time()
        with anyio.fail_after(5):
            assert await _all(lines) == []
        return anyio.current_time() - started

    assert 0.25 <= anyio.run(main) < 5


@pytest.mark.parametrize("source", ["regular file", "/dev/null"])
def test_a_descriptor_the_event_loop_cannot_wait_on_is_read_directly(tmp_path: Path, source: str) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n')
    fd = os.open(path if source == "regular file" else os.devnull, os.O_RDONLY)
    try:
        got = anyio.run(_all, StdinLines(fd, grace=1.0))
    finally:
        os.close(fd)
    assert got == (['{"a": 1}\n', '{"b": 2}\n'] if source == "regular file" else [])


def test_a_request_the_sdk_cannot_take_awaits_no_answer(pipe: tuple[int, int]) -> None:
    """The SDK answers nothing to a line its own validation refuses (it passes the error on), so the end must not
    wait for one: params not an object, no ``jsonrpc``, broken JSON, an id but no method."""
    read_end, write_end = pipe
    refused = [b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": "not an object"}',
               b'{"id": 6, "method": "tools/call"}', b'{"jsonrpc": "2.0", "id": 7, "method": ',
               b'{"id": 8}']  # fmt: skip
    os.write(write_end, b"\n".join(refused) + b"\n")

    async def main() -> float:
        lines = StdinLines(read_end, grace=30.0)
        assert len([await lines.__anext__() for _ in refused]) == len(refused)
        lines.stop()
        started = anyio.current_time()
        with anyio.fail_after(5):
            assert await _all(lines) == []
        return anyio.current_time() - started

    assert anyio.run(main) < 1
