"""rag_eval.compare."""
