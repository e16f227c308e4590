"""Fixtures for the integration tests: Milvus Lite files, a real Milvus server, unique collection names.

``server_uri`` is ``RAG_EVAL_MILVUS_SERVER_URI`` when set (CI starts the server with
``tests/integration/milvus_server.py``), else a server started for the session when the ``milvus`` package
is installed, else the test is skipped. Tests talk to 127.0.0.1 only and run serially against the server.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rag_eval.search.milvus import MilvusStore, is_server_uri
from tests.integration import milvus_server
from tests.milvus_target import target

SERVER_ENV = "RAG_EVAL_MILVUS_SERVER_URI"


@pytest.fixture(scope="session")
def server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get(SERVER_ENV)
    if given:
        yield given
        return
    if importlib.util.find_spec("milvus") is None:
        pytest.skip(f"no Milvus server: set {SERVER_ENV} or install the 'server' extra")
    data = tmp_path_factory.mktemp("milvus-server")
    server = milvus_server.start(data)
    try:
        yield server.uri
    finally:
        milvus_server.stop(server)
        shutil.rmtree(data, ignore_errors=True)  # about 400 MB of unpacked binaries and data


@pytest.fixture
def lite_uri(tmp_path: Path) -> str:
    """A fresh Milvus Lite file for each test."""
    return str(tmp_path / "milvus.db")


@pytest.fixture
def collection_name(request: pytest.FixtureRequest) -> str:
    """A collection name unique to this test (the server is shared by the whole session)."""
    stem = re.sub(r"\W+", "_", request.node.name)[:40].strip("_")
    return f"t_{stem}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(
    params=[
        pytest.param("lite", marks=pytest.mark.milvus_lite),
        pytest.param("server", marks=pytest.mark.milvus_server),
    ]
)
def milvus_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each real Milvus kind in turn: a fresh Lite file, then the session's server."""
    if request.param == "lite":
        return str(tmp_path / "milvus.db")
    return str(request.getfixturevalue("server_uri"))


@pytest.fixture
def drop_after() -> Iterator[Callable[[str, str], None]]:
    """``drop_after(uri, name)``: drop that collection when the test ends (the server outlives the test)."""
    created: list[tuple[str, str]] = []
    yield lambda uri, name: created.append((uri, name))
    for uri, name in created:
        if is_server_uri(uri):
            with MilvusStore(target(uri, name)) as store:
                store.drop()
