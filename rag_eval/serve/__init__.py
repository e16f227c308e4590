"""The agent tool as a service runs it: :mod:`~rag_eval.serve.tracing` records each ``lookup_knowledge`` call
as OpenTelemetry spans with OpenInference's conventions (the ``trace`` extra), the traces a team exports and
the harness reads as unlabelled traffic.

Nothing is imported here, so ``import rag_eval.serve`` needs no OpenTelemetry.
"""
