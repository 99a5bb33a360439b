"""Open the provider a `provider:model` spec names, with credentials passed in (never read here)."""

from __future__ import annotations

from shopfloor.activities.providers.base import ModelProvider
from shopfloor.activities.providers.scripted import ScriptedProvider, load_cassette
from shopfloor.errors import ModelCallError
from shopfloor.models.model_spec import ModelSpec


def check_credentials(
    spec: ModelSpec,
    *,
    openai_api_key: str | None,
    openai_base_url: str | None,
    anthropic_api_key: str | None,
    anthropic_base_url: str | None,
) -> str | None:
    """The one-line problem that would stop this model from being called, or None.

    For the CLI to refuse early, before a run starts and fails on its first model call.
    """
    if spec.provider == "openai" and not openai_api_key and not openai_base_url:
        return (
            f"model {spec} needs an API key: set OPENAI_API_KEY "
            "(or OPENAI_BASE_URL for an OpenAI-compatible server that needs no key)"
        )
    if spec.provider == "anthropic" and not anthropic_api_key:
        return f"model {spec} needs an API key: set ANTHROPIC_API_KEY"
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
