"""What ``rag-eval load`` measures: the configs' own lookups (the default), or a served endpoint.

A served ``lookup_knowledge`` (``rag-eval serve``, or any deployment of it) is named by ``--service`` (the
experiment's ``[service]`` table: ``url``, MCP over streamable HTTP, or ``http``, plain JSON) or by
``--service-url URL`` (an MCP endpoint). How it is measured: docs/serve.md, "Load-testing a served endpoint".
"""

from __future__ import annotations

from dataclasses import replace

from rag_eval.core.errors import ConfigError, ConfigProblem, UnsupportedFeatureError, quoted
from rag_eval.experiment.load_table import LoadFlags, LoadSettings, with_flags
from rag_eval.experiment.model import Experiment, ServiceSpec


def load_endpoint(
    service: ServiceSpec | None, *, use_service: bool, url: str | None, configs_flag: bool = False
) -> ServiceSpec | None:
    """The served endpoint ``rag-eval load`` measures, or None for the configs' own lookups: ``--service`` names
    the experiment's ``[service]`` (``url`` or ``http``), ``--service-url URL`` an MCP endpoint over streamable
    HTTP (with the ``[service]`` table's timeout when there is one). A ``[service]`` over stdio is refused: its
    server is a child of one client, not an endpoint that N client processes can share.

    >>> load_endpoint(None, use_service=False, url=None) is None
    True
    >>> load_endpoint(None, use_service=False, url="http://u:p@127.0.0.1:8000/mcp").endpoint
    'http://127.0.0.1:8000/mcp'
    >>> load_endpoint(ServiceSpec(command=("rag-eval", "serve")), use_service=True, url=None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rag_eval.core.errors.UnsupportedFeatureError: load cannot measure an MCP server over stdio (rag-eval serve): ...
    """
    if url is None and not use_service:
        return None
    problems = []
    if configs_flag:
        problems.append(ConfigProblem("--configs", "does not apply to a served endpoint: it runs its own config"))
    if url is not None and not url.startswith(("http://", "https://")):
        problems.append(
            ConfigProblem("--service-url", f"expected the http(s):// URL of an MCP endpoint, got {quoted(url)}")
        )
    if url is None and service is None:
        no_table = "the experiment has no [service] table: add one (url or http), or give --service-url URL"
        problems.append(ConfigProblem("--service", no_table))
    if problems:
        raise ConfigError(problems)
    if url is not None:
        return replace(service or ServiceSpec(), url=url, command=(), http=None)
    assert service is not None
    if service.command:
        raise UnsupportedFeatureError(
            f"load cannot measure an MCP server over stdio ({service.endpoint}): it would be one server per client "
            "process, started by each; serve it over HTTP (rag-eval serve --transport http) and give [service] url "
            "or --service-url",
            feature="load",
            uri=service.endpoint,
        )
    return service


def served_config(exp: Experiment, spec: ServiceSpec) -> str:
    """The name an endpoint's results go under: the config it is meant to run (``[service] config``, else the
    baseline)."""
    return spec.config or exp.baseline or "service"


def load_settings(exp: Experiment, flags: LoadFlags, endpoint: ServiceSpec | None) -> LoadSettings:
    """The experiment's ``[load]`` (or the defaults) with the flags on top, checked; against an endpoint, one
    config: the one it is meant to run (``[load] configs`` does not apply)."""
    base = exp.load or LoadSettings()
    if endpoint is None:
        return with_flags(base, flags, known_configs=[c.name for c in exp.configs])
    return with_flags(replace(base, configs=()), flags, known_configs=[served_config(exp, endpoint)])
