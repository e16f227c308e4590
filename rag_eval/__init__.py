"""rag_eval: the chunk evidence identity RAG pipeline and its evaluation and regression harness."""
