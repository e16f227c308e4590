r"""Normalised content identity: the text hash the duplicate measures and the content what-if share.

Case and runs of whitespace are folded, so texts that differ only in case and spacing
count as the same content:

>>> content_sha("Check  the SQL\nthread.") == content_sha("check the sql thread.")
True
>>> content_sha("Check the SQL thread.") == content_sha("Check the IO thread.")
False
"""

from __future__ import annotations

import functools
import hashlib


def normalise(text: str) -> str:
    """Lower case, whitespace runs folded to one space, no leading or trailing space."""
    return " ".join(text.lower().split())


@functools.lru_cache(maxsize=1 << 16)  # a replay hashes the same chunks' texts again and again
def content_sha(text: str) -> str:
    """Hash of the normalised text (16 hex digits): equal content, equal hash."""
    return hashlib.sha256(normalise(text).encode()).hexdigest()[:16]
