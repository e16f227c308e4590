"""The fit check's self-retrieval rate for the right model and wrong ones, as docs/existing-collection.md shows.

    python examples/existing-collection/fit_figures.py [--clapnq ../shared/datasets/clapnq] [--seeds 5]

Two collections: the shipped example (the runbooks as LangChain stores them: 600-character chunks, L2) and
ClapNQ ingested by rag_eval (one sentence a chunk, production profile, COSINE), both embedded with
all-MiniLM-L6-v2. Each is checked (``prepare``: the preflight and the fit check, no replay) with ``fit_min =
0`` under each embedder, for ``--seeds`` samples of 50 rows:

- ``all-MiniLM-L6-v2``: the model the collection was embedded with (sentence-transformers);
- ``MiniLM, 3 of 6 layers``: the same model cut after its third layer (a near relative, another space);
- ``MiniLM, rotated``: its vectors turned by a fixed random rotation (same dimension and geometry, another basis);
- ``hashed words``: a bag of words hashed into 384 dimensions (a lexical model of the same dimension).

The last three are ``provider = "python"`` callables of this module. Needs the ``embed`` and ``example`` extras.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KB = ROOT / "datasets" / "incident-kb"
DIM = 384


@cache
def _minilm(layers: int | None = None) -> Any:
    from rag_eval.embed.embedders import EmbedderSpec, SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder(EmbedderSpec())
    if layers is not None:
        encoder = model._model[0].auto_model.encoder
        encoder.layer = encoder.layer[:layers]
    return model


def rotated(texts: Sequence[str]) -> np.ndarray:
    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((DIM, DIM)))
    return np.asarray(_minilm().encode(list(texts)) @ rotation)


def three_layers(texts: Sequence[str]) -> np.ndarray:
    return np.asarray(_minilm(3).encode(list(texts)))


def hashed(texts: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[i, int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % DIM] += 1.0
    return out + 1e-6  # no all-zero vector


EMBEDDERS = {
    "all-MiniLM-L6-v2 (the collection's model)": "",
    "MiniLM, 3 of 6 layers": 'provider = "python"\ncallable = "fit_figures:three_layers"',
    "MiniLM, rotated": 'provider = "python"\ncallable = "fit_figures:rotated"',
    "hashed words": 'provider = "python"\ncallable = "fit_figures:hashed"',
}


def kb_experiment(tmp: Path) -> str:
    db = tmp / "kb.db"
    subprocess.run([sys.executable, str(HERE / "build_langchain.py"), "--uri", str(db)], check=True,
                   capture_output=True)  # fmt: skip
    text = (KB / "experiments" / "existing.toml").read_text()
    text = text.replace('uri = "../../../reports/milvus/incident-kb-langchain.db"', f'uri = "{db}"')
    return text.replace('path = ".."', f'path = "{KB}"').replace('properties = "configs/',
                                                                  f'properties = "{KB}/experiments/configs/')


def clapnq_experiment(tmp: Path, clapnq: Path) -> str:
    from rag_eval.cli import main

    own = (ROOT / "tests" / "experiments" / "clapnq.toml").read_text()
    own = own.replace('path = "../../../shared/datasets/clapnq"', f'path = "{clapnq}"')
    own = own.replace('uri = "../../reports/milvus/clapnq.db"', f'uri = "{tmp / "clapnq.db"}"')
    (tmp / "ingest.toml").write_text(own + f'\n[embedder]\ncache_dir = "{tmp / "cache"}"\n')
    assert main(["ingest", str(tmp / "ingest.toml"), "--quiet"]) == 0
    from rag_eval.search.milvus.existing import collections_at
    from rag_eval.search.milvus.schema import SearchTarget

    _, (name,) = collections_at(SearchTarget(uri=str(tmp / "clapnq.db"), collection=None))
    configs = own[own.index("[[configs]]"):]
    fields = ('{ id = "vector_id", vector = "vector", text = "content", doc_id = "doc_id", chunk_index = '
              '"chunk_index", title = "title", source = "source", start = "char_start", end = "char_end" }')
    return (f'[experiment]\nname = "clapnq-existing"\nbaseline = "legacy-merge"\nproduction_cap = 2\n'
            f'[dataset]\npath = "{clapnq}"\nsplit = "dev"\n[milvus]\nuri = "{tmp / "clapnq.db"}"\n'
            f'[collection]\nname = "{name}"\nfields = {fields}\n' + configs)  # fmt: skip


def rates(base: str, tmp: Path, embedder: str, seeds: int) -> list[tuple[int, int]]:
    from rag_eval.experiment import load_experiment
    from rag_eval.replay.prepare import prepare

    out = []
    for seed in range(seeds):
        path = tmp / "fit.toml"
        table = f'[embedder]\ncache_dir = "{tmp / "cache"}"\nfit_min = 0\nfit_seed = {seed}\n{embedder}\n'
        path.write_text(f"{base}\n{table}")
        fit = prepare(load_experiment(path)).existing.fit  # type: ignore[union-attr]
        out.append((fit.found, fit.sampled))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clapnq", type=Path, default=ROOT.parent / "shared" / "datasets" / "clapnq")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        collections = {"incident-kb (LangChain, L2)": kb_experiment(tmp)}
        if (args.clapnq / "corpus.jsonl").is_file():
            collections["ClapNQ (rag_eval, COSINE)"] = clapnq_experiment(tmp, args.clapnq.resolve())
        print("| collection | embedder | rows that find themselves in their first 10 hits, seed 0 | "
              f"over {args.seeds} seeds (min-max of 50 each) |\n|---|---|---|---|")  # fmt: skip
        for label, base in collections.items():
            for model, embedder in EMBEDDERS.items():
                found = rates(base, tmp, embedder, args.seeds)
                low, high = min(f for f, _ in found), max(f for f, _ in found)
                print(f"| {label} | {model} | {found[0][0]} of {found[0][1]} | {low}-{high} |", flush=True)


if __name__ == "__main__":
    main()
