"""The ``rag-eval serve`` command: the settings of a serve TOML file and the flags on top, then the service.

Imports nothing heavy itself, so ``rag-eval --help`` stays light.
"""

from __future__ import annotations

import argparse


def serve_command(args: argparse.Namespace) -> int:
    """Read the settings (a file, then the flags), check them and serve until told to stop."""
    from rag_eval.serve.app import serve
    from rag_eval.serve.settings import ServeSettings, load_serve_file, with_flags

    base = load_serve_file(args.file) if args.file else ServeSettings()
    return serve(with_flags(base, vars(args)))
