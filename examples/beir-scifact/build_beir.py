"""Build a BEIR data set directory for rag-eval from a BEIR download (nothing is downloaded here).

    python examples/beir-scifact/build_beir.py SOURCE OUT [--split test]

SOURCE is the zip file BEIR publishes for a data set (``scifact.zip``: one folder holding ``corpus.jsonl``,
``queries.jsonl`` and ``qrels/<split>.tsv``), or such a folder already extracted. OUT receives
``corpus.jsonl`` (as published), ``queries.jsonl`` (only the queries the split judges, as BEIR evaluates
them) and ``qrels/<split>.tsv``. OUT is written whole or not at all (a temporary directory moved into
place); an existing OUT is replaced only with ``--force``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FILES = ("corpus.jsonl", "queries.jsonl")


@contextmanager
def opened(source: Path) -> Iterator[Path]:
    """The BEIR folder in ``source``: the folder itself, or the one a zip file holds (extracted to a
    temporary directory)."""
    if source.is_dir():
        yield _beir_root(source)
        return
    if not zipfile.is_zipfile(source):
        raise SystemExit(f"{source}: neither a directory nor a zip file")
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(source) as archive:
        for member in archive.namelist():  # no absolute path, no '..': nothing is written outside tmp
            if member.startswith("/") or ".." in Path(member).parts:
                raise SystemExit(f"{source}: refusing the member {member!r}")
        archive.extractall(tmp)
        yield _beir_root(Path(tmp))


def _beir_root(folder: Path) -> Path:
    """``folder`` when it holds corpus.jsonl, else the one folder below it that does."""
    if (folder / "corpus.jsonl").is_file():
        return folder
    found = sorted(p.parent for p in folder.glob("*/corpus.jsonl"))
    if len(found) != 1:
        raise SystemExit(
            f"{folder}: expected one BEIR folder (corpus.jsonl, queries.jsonl, qrels/), found {len(found)}"
        )
    return found[0]


def judged_queries(qrels: Path) -> set[str]:
    """The query ids of a BEIR qrels file (``query-id  corpus-id  score``, a header line or not)."""
    ids: set[str] = set()
    for n, line in enumerate(qrels.read_text(encoding="utf-8").splitlines(), start=1):
        cells = line.split("\t")
        if not line.strip() or (n == 1 and cells[0].strip().lower() in ("query-id", "query_id", "qid")):
            continue
        if len(cells) != 3:
            raise SystemExit(f"{qrels}:{n}: expected 3 tab-separated columns (query-id, corpus-id, score)")
        ids.add(cells[0].strip())
    return ids


def build(source: Path, out: Path, split: str, *, force: bool = False) -> tuple[int, int]:
    """Write the data set of ``split`` into ``out``; (documents, queries) written."""
    if out.exists() and not force:
        raise SystemExit(f"{out} exists: remove it or pass --force")
    with opened(source) as root:
        qrels = root / "qrels" / f"{split}.tsv"
        for path in (*(root / f for f in FILES), qrels):
            if not path.is_file():
                raise SystemExit(
                    f"{path}: missing (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/{split}.tsv)"
                )
        wanted = judged_queries(qrels)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            (staging / "qrels").mkdir()
            shutil.copyfile(root / "corpus.jsonl", staging / "corpus.jsonl")
            shutil.copyfile(qrels, staging / "qrels" / f"{split}.tsv")
            kept = 0
            with (
                open(root / "queries.jsonl", encoding="utf-8") as src,
                open(staging / "queries.jsonl", "w", encoding="utf-8") as dst,
            ):
                for line in src:
                    if line.strip() and json.loads(line).get("_id") in wanted:
                        dst.write(line if line.endswith("\n") else line + "\n")
                        kept += 1
            with open(staging / "corpus.jsonl", encoding="utf-8") as fh:
                documents = sum(1 for line in fh if line.strip())
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return documents, kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the BEIR zip file (scifact.zip) or its extracted folder")
    parser.add_argument("out", type=Path, help="the data set directory to write (e.g. reports/datasets/scifact)")
    parser.add_argument("--split", default="test", help="the qrels split (default test)")
    parser.add_argument("--force", action="store_true", help="replace OUT when it exists")
    args = parser.parse_args(argv)
    documents, queries = build(args.source, args.out, args.split, force=args.force)
    print(f"{args.out}: {documents:,} documents, {queries:,} queries judged in qrels/{args.split}.tsv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
