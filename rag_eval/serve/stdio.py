"""The stdio transport, with an end that SIGTERM (or Ctrl-C) can reach: the signal closes the input once the
requests already read are answered.

The MCP SDK's stdio transport reads stdin in a worker thread blocked in ``readline``, which nothing wakes, so its
server ends only when the client closes stdin, and a request still under way then is answered "Connection
closed". Here stdin is read in the event loop itself (``os.read`` once the descriptor is readable), and the
signal, received by the event loop (not raised wherever the main thread happens to be), stops the reading: the
complete lines already read are still served, the service waits until every request read has its answer on the
wire (at most ``grace`` seconds), then ends as if the client had closed stdin. A handler that raised in the main
thread instead was swallowed by asyncio when it landed in a callback or a task's step, and left the server
running (one SIGTERM in five right after an answer).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel

READ_SIZE = 1 << 16


class StdinLines:
    """The lines of ``fd`` (each with its newline, decoded as UTF-8 with replacement, as the SDK's reader gives
    them), for ``async for``. :meth:`stop` stops the reading: the complete lines already read still come, and
    the lines end once every request among them is :meth:`answered` (or ``grace`` seconds have passed); so do
    they at the end of the input (the client closed stdin: what it asked before is answered, then the SDK ends)."""

    def __init__(self, fd: int, *, grace: float) -> None:
        self._fd = fd
        self._grace = grace
        self._buffer = b""
        self._eof = False
        self._stopped = False
        self._waiting: anyio.CancelScope | None = None
        self._pollable = _pollable(fd)
        self._pending: set[Any] = set()
        self._settled: anyio.Event | None = None  # made in the event loop, by the first request

    def stop(self) -> None:
        """Read no more: a read waiting for input returns at once (call it in the event loop's thread)."""
        self._stopped = True
        if self._waiting is not None:
            self._waiting.cancel()

    def answered(self, request_id: Any) -> None:
        """The answer to request ``request_id`` has been handed to the writer."""
        self._pending.discard(request_id)
        if not self._pending and self._settled is not None:
            self._settled.set()

    def _taken_request(self, request_id: Any) -> None:
        self._pending.add(request_id)
        if self._settled is None or self._settled.is_set():
            self._settled = anyio.Event()

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                return self._taken(line + newline)
            if self._eof and self._buffer:  # the last line, without its newline
                line, self._buffer = self._buffer, b""
                return self._taken(line)
            if self._eof or self._stopped:
                if self._pending and self._settled is not None:
                    with anyio.move_on_after(self._grace):
                        await self._settled.wait()
                raise StopAsyncIteration
            await self._read()

    def _taken(self, raw: bytes) -> str:
        """``raw`` as the SDK's line; a request the SDK will take (its own validation) awaits an answer."""
        import mcp_types

        line = raw.decode("utf-8", errors="replace")
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:  # the SDK passes the error on and answers nothing: nothing to wait for
            return line
        if isinstance(message, mcp_types.JSONRPCRequest):
            self._taken_request(message.id)
        return line

    async def _read(self) -> None:
        if self._pollable:
            with anyio.CancelScope() as scope:
                self._waiting = scope
                await anyio.wait_readable(self._fd)
            self._waiting = None
            if scope.cancelled_caught or self._stopped:
                return
        else:  # a regular file or a device such as /dev/null: a read returns at once
            await anyio.lowlevel.checkpoint()
        chunk = os.read(self._fd, READ_SIZE)
        self._buffer += chunk
        self._eof = not chunk


class _Answering:
    """The SDK's write stream, telling ``lines`` of each answer (a response or an error with an id) it passes on."""

    def __init__(self, stream: Any, lines: StdinLines) -> None:
        self._stream = stream
        self._lines = lines

    async def send(self, item: Any, /) -> None:
        import mcp_types

        await self._stream.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            self._lines.answered(message.id)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Answering:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stream.__aexit__(*exc)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (a pipe, socket or terminal; not a regular file)."""
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (ValueError, OSError):  # EPERM for a regular file
            return False
    return True


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[int]:
    """A private duplicate of fd 0 to read the wire from, fd 0 itself pointed at the null device meanwhile (as the
    SDK does: a child process or a library reading stdin cannot take the client's bytes), restored after."""
    wire = os.dup(0)
    os.set_inheritable(wire, False)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield wire
    finally:
        os.dup2(wire, 0)
        os.close(wire)


def run_stdio(server: Any, *, grace: float) -> int | None:
    """Serve ``server`` (an :class:`MCPServer`) over stdio until the client closes stdin (None) or SIGTERM / SIGINT
    arrives (that signal's number, once the requests already read are answered, at most ``grace`` seconds)."""
    from mcp.server.stdio import stdio_server  # the extra's SDK, checked by rag_eval.serve.app's import

    received: list[int] = []

    async def main(wire: int) -> None:
        lines = StdinLines(wire, grace=grace)

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    received.append(int(signum))
                    lines.stop()
                    return

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            with contextlib.redirect_stdout(sys.__stdout__):  # the SDK claims fd 1 when sys.stdout is on it
                async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
                    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, with our stdin
                    await lowlevel.run(read_stream, _Answering(write_stream, lines),
                                       lowlevel.create_initialization_options())  # fmt: skip
            tasks.cancel_scope.cancel()

    with _claimed_stdin() as wire:
        anyio.run(main, wire)
    return received[0] if received else None


__all__ = ["StdinLines", "run_stdio"]
