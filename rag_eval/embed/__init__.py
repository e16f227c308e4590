"""rag_eval.embed."""
