"""Start and stop a throwaway Milvus 2.3 server (``milvus-server`` from the ``milvus`` package) for tests and CI.

::

    python -m tests.integration.milvus_server start --data DIR --pidfile F   # prints the URI when it answers
    python -m tests.integration.milvus_server stop --pidfile F

Why not the package's own helpers: ``wait_started`` polls for 180 s without noticing that a second server
panicked on port 2380, and the ``milvus-server`` wrapper handles only SIGINT (SIGTERM orphans its
``milvus`` child). So the wrapper is started without waiting on it; this module polls the processes, the
health endpoint and a client connection under a 60 s cap, reads the real ports (they move when busy), and
stops both processes by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

START_TIMEOUT_S = 60.0
ETCD_PEER_PORT = 2380  # hard-wired in the embedded etcd: one server per machine


class MilvusServerError(RuntimeError):
    """The server could not be started (the message says why and where its logs are)."""


@dataclass(frozen=True, slots=True)
class RunningServer:
    uri: str
    data_dir: str
    wrapper_pid: int
    wrapper_started: str
    child_pid: int | None = None
    child_started: str | None = None


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (guards against killing a recycled PID); None if gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _config_port(data_dir: Path) -> int | None:
    """The proxy port written to ``configs/milvus.yaml`` (the wrapper moves it when 19530 is taken)."""
    path = data_dir / "configs" / "milvus.yaml"
    if not path.exists():
        return None
    section = None
    for line in path.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            section = line.split(":", 1)[0].strip()
        elif section == "proxy" and line.startswith("  port:"):
            return int(line.split(":", 1)[1].split("#", 1)[0].strip())
    return None


def _metrics_port(child_pid: int) -> int | None:
    try:
        env = Path(f"/proc/{child_pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"METRICS_PORT="):
            return int(item.split(b"=", 1)[1])
    return None


def _healthy(metrics_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=2) as resp:
            return b"OK" in resp.read()
    except OSError:
        return False


def _answers(uri: str) -> bool:
    import logging

    from pymilvus import MilvusClient

    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    try:
        client = MilvusClient(uri=uri, timeout=3)
        client.list_collections(timeout=3)
        client.close()
        return True
    except Exception:
        return False


def _port_busy(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _log_tail(data_dir: Path, lines: int = 15) -> str:
    texts = []
    for name in ("wrapper.log", "logs/milvus-stderr.log"):
        path = data_dir / name
        if path.exists():
            texts.append(f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(texts)


def start(data_dir: Path, *, pidfile: Path | None = None, timeout: float = START_TIMEOUT_S) -> RunningServer:
    """Start a server with its data in ``data_dir`` and return once a client can use it (else stop it, raise)."""
    exe = Path(sys.executable).with_name("milvus-server")
    if not exe.exists():
        found = shutil.which("milvus-server")
        if found is None:
            raise MilvusServerError("milvus-server not found: pip install -e '.[server]'")
        exe = Path(found)
    if _port_busy(ETCD_PEER_PORT):
        raise MilvusServerError(f"port {ETCD_PEER_PORT} is busy: another Milvus server runs on this machine; stop "
                                "it or point RAG_EVAL_MILVUS_SERVER_URI at it")
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "wrapper.log", "wb") as log:
        proc = subprocess.Popen([str(exe), "--data", str(data_dir)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = RunningServer(uri="", data_dir=str(data_dir), wrapper_pid=proc.pid,
                           wrapper_started=_start_time(proc.pid) or "")
    _write(pidfile, server)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise MilvusServerError(f"milvus-server exited with {proc.returncode}\n{_log_tail(data_dir)}")
            if server.child_pid is None:
                kids = [p for p in _children(proc.pid) if Path(f"/proc/{p}/comm").read_text().strip() == "milvus"]
                if kids:
                    server = RunningServer(uri="", data_dir=str(data_dir), wrapper_pid=proc.pid,
                                           wrapper_started=server.wrapper_started, child_pid=kids[0],
                                           child_started=_start_time(kids[0]))
                    _write(pidfile, server)
            elif _start_time(server.child_pid) is None:
                raise MilvusServerError(f"the milvus process died while starting\n{_log_tail(data_dir)}")
            else:
                port, metrics = _config_port(data_dir), _metrics_port(server.child_pid)
                if port and metrics and _healthy(metrics) and _answers(f"http://127.0.0.1:{port}"):
                    server = RunningServer(**{**asdict(server), "uri": f"http://127.0.0.1:{port}"})
                    _write(pidfile, server)
                    return server
            time.sleep(0.5)
        raise MilvusServerError(f"Milvus did not answer within {timeout:g} s\n{_log_tail(data_dir)}")
    except BaseException:
        stop(server)
        raise


def stop(server: RunningServer, *, grace: float = 10.0) -> None:
    """SIGINT the wrapper (the only signal it handles), then make sure both PIDs are gone."""
    procs = [(server.wrapper_pid, server.wrapper_started)]
    if server.child_pid is not None:
        procs.append((server.child_pid, server.child_started or ""))
    alive = [(pid, born) for pid, born in procs if born and _start_time(pid) == born]
    if alive and alive[0][0] == server.wrapper_pid:
        os.kill(server.wrapper_pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        for pid, born in alive:
            if sig is not None and _start_time(pid) == born:
                os.kill(pid, sig)
        while time.monotonic() < deadline and any(_start_time(pid) == born for pid, born in alive):
            _reap(alive)
            time.sleep(0.1)
        deadline = time.monotonic() + 3.0
    _reap(alive)


def _reap(procs: list[tuple[int, str]]) -> None:
    for pid, _ in procs:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _write(pidfile: Path | None, server: RunningServer) -> None:
    if pidfile is not None:
        tmp = pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(server)))
        tmp.replace(pidfile)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.milvus_server")
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--data", type=Path, help="data directory of the server (start)")
    parser.add_argument("--pidfile", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=START_TIMEOUT_S)
    args = parser.parse_args(argv)
    if args.action == "start":
        if args.data is None:
            parser.error("start needs --data")
        try:
            print(start(args.data, pidfile=args.pidfile, timeout=args.timeout).uri)
        except MilvusServerError as exc:
            print(f"cannot start Milvus: {exc}", file=sys.stderr)
            return 1
        return 0
    if not args.pidfile.exists():
        return 0
    stop(RunningServer(**json.loads(args.pidfile.read_text())))
    args.pidfile.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
