"""Open the provider a `provider:model` spec names, with credentials passed in (never read here)."""

from __future__ import annotations

from shopfloor.activities.providers.base import ModelProvider
from shopfloor.activities.providers.scripted import ScriptedProvider, load_cassette
from shopfloor.errors import ModelCallError
from shopfloor.models.model_spec import ModelSpec

# Where a worker's missing key has to be set: the worker calls the models, not the command that
# started the run (a key exported only in the terminal of `shopfloor agent` never reaches it).
WORKER_ENVIRONMENT = (
    "the worker's environment: set it where `shopfloor dev` or `shopfloor worker` runs (a key set only "
    "where you start runs does not reach the worker)"
)


def missing_key(
    spec: ModelSpec, *, openai_api_key: str | None, openai_base_url: str | None, anthropic_api_key: str | None
) -> str | None:
    """The environment variable this model still needs before it can be called, or None."""
    if spec.provider == "openai" and not openai_api_key and not openai_base_url:
        return "OPENAI_API_KEY"
    if spec.provider == "anthropic" and not anthropic_api_key:
        return "ANTHROPIC_API_KEY"
    return None


def key_problem(spec: ModelSpec, env_name: str, where: str) -> str:
    alternative = (
        " (or OPENAI_BASE_URL for an OpenAI-compatible server that needs no key)"
        if env_name == "OPENAI_API_KEY"
        else ""
    )
    return f"model {spec} needs {env_name}{alternative}, and it is not set in {where}"


def check_credentials(
    spec: ModelSpec,
    *,
    openai_api_key: str | None,
    openai_base_url: str | None,
    anthropic_api_key: str | None,
    anthropic_base_url: str | None,
    where: str = "this process",
) -> str | None:
    """The one-line problem that would stop this model from being called here, or None.

    For a process that calls the model itself (a worker, `shopfloor demo`) to refuse early,
    before a run starts and fails on its first model call.
    """
    name = missing_key(
        spec, openai_api_key=openai_api_key, openai_base_url=openai_base_url, anthropic_api_key=anthropic_api_key
    )
    if name is not None:
        return key_problem(spec, name, where)
    if spec.provider == "scripted":
        try:
            load_cassette(spec.model)
        except ModelCallError as exc:
            return str(exc)
    return None


def open_provider(
    spec: ModelSpec,
    *,
    openai_api_key: str | None,
    openai_base_url: str | None,
    anthropic_api_key: str | None,
    anthropic_base_url: str | None,
    timeout_s: float = 600,
) -> ModelProvider:
    """A ready provider; ModelCallError (non-retryable) when it cannot be used as configured."""
    if spec.provider == "scripted":
        return ScriptedProvider(spec.model)  # raises its own ModelCallError for a bad cassette
    problem = check_credentials(
        spec,
        openai_api_key=openai_api_key,
        openai_base_url=openai_base_url,
        anthropic_api_key=anthropic_api_key,
        anthropic_base_url=anthropic_base_url,
        where=WORKER_ENVIRONMENT,
    )
    if problem is not None:
        raise ModelCallError(problem, retryable=False)
    # The SDKs take seconds to import: only a process that calls a provider pays for it.
    if spec.provider == "openai":
        from shopfloor.activities.providers.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(spec.model, openai_api_key, openai_base_url, timeout_s=timeout_s)
    if spec.provider == "anthropic":
        from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider

        return AnthropicMessagesProvider(spec.model, anthropic_api_key, anthropic_base_url, timeout_s=timeout_s)
    raise ModelCallError(f"unknown model provider {spec.provider!r}", retryable=False)
