"""The one door to pymilvus: imported on first use, so that importing the adapter stays light."""

from __future__ import annotations

import logging
from typing import Any


def pymilvus() -> Any:
    """The pymilvus module, its loggers quieted."""
    import pymilvus

    # rag_eval reports every Milvus error itself; pymilvus would also log each failed RPC with a traceback.
    for name in ("pymilvus", "pymilvus.milvus_client", "milvus_lite"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return pymilvus
