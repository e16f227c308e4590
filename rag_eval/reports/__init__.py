"""rag_eval.reports."""
