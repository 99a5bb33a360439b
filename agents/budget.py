"""Budgets: what a run has spent, what that cost, and whether a limit is reached.

Pure and deterministic: the workflow passes the time in (`workflow.now()` as epoch seconds).
`Spent` is small and serializable, so it survives a continue-as-new inside the workflow input.

Cost comes from a per-model price table. A model with no known price has an unknown cost: when
the run has a cost limit, `limit_reached` then stops it with a reason that says so (and
`cost_limit_problem` lets the workflow say so before the first step), rather than letting the
limit silently pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import Limits
from shopfloor.models.transcript import Usage


class Price(BaseModel):
    input_per_mtok: float = Field(ge=0)  # USD per million input tokens
    output_per_mtok: float = Field(ge=0)  # USD per million output tokens


def _p(input_per_mtok: float, output_per_mtok: float) -> Price:
    return Price(input_per_mtok=input_per_mtok, output_per_mtok=output_per_mtok)


# Public list prices in USD per million tokens, standard (not batch, not cached-input) rates,
# as published by OpenAI and Anthropic and known to us in late 2025. Prices change: override
# them in settings rather than trusting this table for billing.
DEFAULT_PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": _p(1.25, 10.00),
    "gpt-5-mini": _p(0.25, 2.00),
    "gpt-5-nano": _p(0.05, 0.40),
    "gpt-4.1": _p(2.00, 8.00),
    "gpt-4.1-mini": _p(0.40, 1.60),
    "gpt-4.1-nano": _p(0.10, 0.40),
    "gpt-4o": _p(2.50, 10.00),
    "gpt-4o-2024-05-13": _p(5.00, 15.00),  # the first gpt-4o snapshot kept its launch price
    "gpt-4o-mini": _p(0.15, 0.60),
    "gpt-4-turbo": _p(10.00, 30.00),
    "gpt-3.5-turbo": _p(0.50, 1.50),
    "o1": _p(15.00, 60.00),
    "o1-mini": _p(1.10, 4.40),
    "o3": _p(2.00, 8.00),
    "o3-pro": _p(20.00, 80.00),
    "o3-mini": _p(1.10, 4.40),
    "o4-mini": _p(1.10, 4.40),
    # Anthropic
    "claude-opus-4-5": _p(5.00, 25.00),
    "claude-opus-4-1": _p(15.00, 75.00),
    "claude-opus-4": _p(15.00, 75.00),
    "claude-sonnet-4-5": _p(3.00, 15.00),
    "claude-sonnet-4": _p(3.00, 15.00),
    "claude-haiku-4-5": _p(1.00, 5.00),
    "claude-3-7-sonnet": _p(3.00, 15.00),
    "claude-3-5-sonnet": _p(3.00, 15.00),
    "claude-3-5-haiku": _p(0.80, 4.00),
    "claude-3-opus": _p(15.00, 75.00),
    "claude-3-haiku": _p(0.25, 1.25),
}

FREE_PROVIDERS = ("scripted",)  # recorded cassettes: no model is called


def price_table(overrides: Mapping[str, Price] | None = None) -> dict[str, Price]:
    """The default prices with `overrides` (from settings) on top."""
    table = dict(DEFAULT_PRICES)
    for name, price in (overrides or {}).items():
        table[name.strip().lower()] = price
    return table


def _lookup(name: str, prices: Mapping[str, Price]) -> Price | None:
    if name in prices:
        return prices[name]
    # Longest prefix ending at a "-" boundary: claude-sonnet-4-5-20250929 -> claude-sonnet-4-5,
    # gpt-4o-mini-2024-07-18 -> gpt-4o-mini; but gpt-4.5 is not gpt-4, nor gpt-4o gpt-4.
    best: str | None = None
    for key in prices:
        if name.startswith(key + "-") and (best is None or len(key) > len(best)):
            best = key
    return prices[best] if best is not None else None


def find_price(model_spec: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `provider:model` (or a bare model name); None when unknown.

    Looked up by the whole spec first (so settings can price `openai:my-local-model`), then by
    the model name, exactly and then by longest prefix, then by the last part of a path-like
    name (`openrouter/openai/gpt-4o`). Matching ignores case.
    """
    table = {k.lower(): v for k, v in (prices if prices is not None else DEFAULT_PRICES).items()}
    spec = model_spec.strip().lower()
    provider, sep, model = spec.partition(":")
    if not sep:
        provider, model = "", spec
    if provider in FREE_PROVIDERS:
        return Price(input_per_mtok=0.0, output_per_mtok=0.0)
    candidates = [spec, model] if sep else [model]
    if "/" in model:
        candidates.append(model.rsplit("/", 1)[1])
    for name in candidates:
        if name and (price := _lookup(name, table)) is not None:
            return price
    return None


def cost_usd(model_spec: str, usage: Usage, prices: Mapping[str, Price] | None = None) -> float | None:
    """What `usage` cost on `model_spec` in USD; 0 for scripted models; None when unknown.

    `prices` replaces the default table (use `price_table(overrides)` to extend it instead).
    """
    price = find_price(model_spec, prices)
    if price is None:
        return None
    return (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000


class Spent(BaseModel):
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # of the steps whose cost is known
    cost_unknown: bool = False  # some step's cost is unknown: `cost_usd` is a lower bound
    started_at: float | None = None  # epoch seconds, from workflow.now()

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def after_step(self, usage: Usage, cost: float | None) -> Spent:
        """A copy with one more model step, its usage and its cost (None: unknown)."""
        return self.model_copy(
            update={
                "steps": self.steps + 1,
                "input_tokens": self.input_tokens + usage.input_tokens,
                "output_tokens": self.output_tokens + usage.output_tokens,
                "cost_usd": self.cost_usd + (cost or 0.0),
                "cost_unknown": self.cost_unknown or cost is None,
            }
        )

    def after_subagent(self, usage: Usage, cost: float) -> Spent:
        """A copy with a subagent's spending added: its tokens and cost count in this run's
        limits (its steps are its own)."""
        return self.model_copy(
            update={
                "input_tokens": self.input_tokens + usage.input_tokens,
                "output_tokens": self.output_tokens + usage.output_tokens,
                "cost_usd": self.cost_usd + cost,
            }
        )


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{seconds:.0f}s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def cost_limit_problem(model_spec: str, limits: Limits, prices: Mapping[str, Price] | None = None) -> str | None:
    """Why the cost limit of `limits` cannot be enforced for `model_spec`, or None if it can."""
    if limits.max_cost_usd is None or find_price(model_spec, prices) is not None:
        return None
    return (
        f"cost limit of ${limits.max_cost_usd:,.2f} cannot be enforced: no price is known for model "
        f"{model_spec!r}; add it to the price table in settings, or run without a cost limit"
    )


def limit_reached(spent: Spent, limits: Limits, now: float) -> str | None:
    """The first limit reached, as a reason a person can read; None while all are within bounds.

    Call it before each model step: a limit is reached once the spending equals or passes it
    (after 40 of 40 steps, no 41st step starts).
    """
    if spent.steps >= limits.max_steps:
        return f"step limit reached: {spent.steps:,} of {limits.max_steps:,} steps"
    if limits.max_tokens is not None and spent.tokens >= limits.max_tokens:
        return f"token limit reached: {spent.tokens:,} of {limits.max_tokens:,} tokens"
    if limits.max_cost_usd is not None:
        if spent.cost_unknown:
            return (
                f"cost limit of ${limits.max_cost_usd:,.2f} cannot be enforced: the cost of some steps is "
                f"unknown (no price for the model; ${spent.cost_usd:,.4f} known so far)"
            )
        if spent.cost_usd >= limits.max_cost_usd:
            return f"cost limit reached: ${spent.cost_usd:,.4f} of ${limits.max_cost_usd:,.2f}"
    if limits.max_wall_s is not None and spent.started_at is not None:
        elapsed = now - spent.started_at
        if elapsed >= limits.max_wall_s:
            return f"wall-time limit reached: {_duration(elapsed)} of {_duration(limits.max_wall_s)}"
    return None
