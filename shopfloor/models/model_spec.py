"""`provider:model` strings, as users write them in SHOPFLOOR_MODEL and --model."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel

Provider = Literal["openai", "anthropic", "scripted"]
PROVIDERS: tuple[str, ...] = get_args(Provider)


class ModelSpec(BaseModel):
    provider: Provider
    model: str

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """Parse `provider:model`; raise ValueError with a message a user can act on."""
        provider, sep, model = text.strip().partition(":")
        if not sep or not model.strip():
            raise ValueError(
                f"model {text!r} is not of the form provider:model "
                f"(for example openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, scripted:path/to/cassette.json)"
            )
        if provider not in PROVIDERS:
            raise ValueError(
                f"unknown model provider {provider!r} in {text!r}; known providers: {', '.join(PROVIDERS)}"
            )
        return cls(provider=provider, model=model.strip())  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"
