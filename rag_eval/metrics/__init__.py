"""rag_eval.metrics."""
