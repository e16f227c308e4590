"""Command lines as they may be recorded and printed: without the credentials a URL can carry.

A run's lock records who holds it (``.lock.json``, which outlives a killed process) and a second run
prints that holder in its refusal, often into a CI log; a Milvus, scheduler or storage URL typed on the
command line may carry ``user:password@``, a token in its query or a signature in its fragment. Each
argument is redacted on its own, so what is shown is still the command that was run.

>>> redact_argv(["rag-eval", "run", "--milvus-uri", "http://alice:s3cret@db:19530/?token=t", "--out=a@b"])
['rag-eval', 'run', '--milvus-uri', 'http://db:19530/', '--out=a@b']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# user[:password]@host[:port][/path] without a scheme: userinfo has no slash, the host part is a host name
_BARE = re.compile(r"^(?P<user>[^/@\s]+)@(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?P<rest>(:[0-9]*)?(/.*)?)$")


def redact_value(value: str) -> str:
    """``value`` without the userinfo, query and fragment of a URL (anything else as it is)."""
    scheme, sep, rest = value.partition("://")
    if sep and scheme and "/" not in scheme:
        netloc, slash, path = rest.partition("/")
        host = netloc.rsplit("@", 1)[-1]
        path = re.split(r"[?#]", path, maxsplit=1)[0]
        host = re.split(r"[?#]", host, maxsplit=1)[0]
        return f"{scheme}://{host}{slash}{path}"
    bare = _BARE.match(value)
    if bare is not None and (":" in bare["user"] or bare["rest"].startswith(":")):
        return bare["host"] + re.split(r"[?#]", bare["rest"], maxsplit=1)[0]
    return value


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Every argument of ``argv`` redacted (a ``--flag=VALUE`` argument: its value)."""
    shown = []
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and eq:
            shown.append(f"{flag}={redact_value(value)}")
        else:
            shown.append(redact_value(arg))
    return shown
