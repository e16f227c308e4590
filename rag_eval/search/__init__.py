"""Adapters of KnowledgeSearchPort: ``memory`` (in-process, public API for tests) and ``milvus``."""
