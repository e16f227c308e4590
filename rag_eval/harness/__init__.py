"""rag_eval.harness."""
