"""Budgets: prices, costs, spending and the limits that stop a run."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopfloor.agents.budget import (
    DEFAULT_PRICES,
    Price,
    Spent,
    cost_limit_problem,
    cost_usd,
    find_price,
    limit_reached,
    price_table,
)
from shopfloor.models.agent_run import Limits
from shopfloor.models.transcript import Usage

pytestmark = pytest.mark.fast

MTOK = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


@pytest.mark.parametrize(
    ("spec", "price_key"),
    [
        ("openai:gpt-4o", "gpt-4o"),
        ("openai:gpt-4o-mini", "gpt-4o-mini"),
        ("openai:gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai:gpt-4o-2024-08-06", "gpt-4o"),
        ("openai:gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
        ("openai:gpt-4.1", "gpt-4.1"),
        ("openai:gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("openai:o3", "o3"),
        ("openai:o3-2025-04-16", "o3"),
        ("openai:o3-mini", "o3-mini"),
        ("openai:o4-mini", "o4-mini"),
        ("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic:claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("anthropic:claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("anthropic:claude-haiku-4-5", "claude-haiku-4-5"),
        ("anthropic:Claude-Haiku-4-5", "claude-haiku-4-5"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("openai:openrouter/openai/gpt-4o-mini", "gpt-4o-mini"),
        (" openai:gpt-4o ", "gpt-4o"),
    ],
)
def test_find_price(spec: str, price_key: str) -> None:
    assert find_price(spec) == DEFAULT_PRICES[price_key]


@pytest.mark.parametrize(
    "spec",
    ["openai:gpt-4.5-preview", "openai:gpt-4oo", "openai:llama3", "anthropic:claude-sonnet", "openai:", "", "o"],
)
def test_unknown_models(spec: str) -> None:
    assert find_price(spec) is None
    assert cost_usd(spec, MTOK) is None


def test_prefix_needs_a_dash_boundary() -> None:
    # gpt-4o is not a dated gpt-4 and gpt-4.5 is not gpt-4: the prefix must end at a "-".
    prices = {"gpt-4": Price(input_per_mtok=30, output_per_mtok=60)}
    assert find_price("openai:gpt-4o", prices) is None
    assert find_price("openai:gpt-4.5", prices) is None
    assert find_price("openai:gpt-4-0613", prices) == prices["gpt-4"]


def test_prices_are_plausible() -> None:
    for name, price in DEFAULT_PRICES.items():
        assert name == name.lower() and ":" not in name
        assert 0 < price.input_per_mtok <= price.output_per_mtok <= 200, name


@pytest.mark.parametrize(
    ("spec", "usage", "expected"),
    [
        ("openai:gpt-4o", MTOK, 12.50),
        ("openai:gpt-4o-mini", Usage(input_tokens=2_000_000, output_tokens=500_000), 0.60),
        ("anthropic:claude-sonnet-4-5-20250929", Usage(input_tokens=10_000, output_tokens=2_000), 0.06),
        ("anthropic:claude-opus-4-1", Usage(input_tokens=1_000, output_tokens=1_000), 0.09),
        ("openai:gpt-4o", Usage(), 0.0),
        ("scripted:explore-demo", MTOK, 0.0),
        ("scripted:path/to/cassette.json", MTOK, 0.0),
    ],
)
def test_cost_usd(spec: str, usage: Usage, expected: float) -> None:
    assert cost_usd(spec, usage) == pytest.approx(expected)


def test_prices_can_be_overridden() -> None:
    local = Price(input_per_mtok=0, output_per_mtok=0)
    cheap = Price(input_per_mtok=1, output_per_mtok=1)
    table = price_table({"openai:llama3": local, "GPT-4o": cheap})
    assert cost_usd("openai:llama3", MTOK, table) == 0.0
    assert cost_usd("openai:gpt-4o", MTOK, table) == pytest.approx(2.0)
    assert cost_usd("openai:gpt-4o-mini", MTOK, table) == pytest.approx(0.75)  # defaults still there
    # A table passed as is replaces the defaults.
    assert cost_usd("openai:gpt-4o-mini", MTOK, {"llama3": local}) is None
    assert price_table() == DEFAULT_PRICES and price_table() is not DEFAULT_PRICES


def test_spent_after_step() -> None:
    s = Spent(started_at=100.0)
    s = s.after_step(Usage(input_tokens=100, output_tokens=20), 0.5)
    s = s.after_step(Usage(input_tokens=50, output_tokens=5), 0.25)
    assert (s.steps, s.input_tokens, s.output_tokens, s.tokens) == (2, 150, 25, 175)
    assert s.cost_usd == pytest.approx(0.75) and not s.cost_unknown and s.started_at == 100.0
    s2 = s.after_step(Usage(input_tokens=1, output_tokens=1), None)
    assert s2.cost_unknown and s2.cost_usd == pytest.approx(0.75) and s2.steps == 3
    assert not s.cost_unknown  # copies, not changes
    assert Spent.model_validate_json(s2.model_dump_json()) == s2


NOW = 1_000.0


@pytest.mark.parametrize(
    ("spent", "limits", "reason"),
    [
        (Spent(), Limits(), None),
        (Spent(steps=39), Limits(max_steps=40), None),
        (Spent(steps=40), Limits(max_steps=40), "step limit reached: 40 of 40 steps"),
        (
            Spent(steps=1, input_tokens=100_000, output_tokens=20_345),
            Limits(max_tokens=100_000),
            "token limit reached: 120,345 of 100,000 tokens",
        ),
        (Spent(steps=1, input_tokens=99_000, output_tokens=999), Limits(max_tokens=100_000), None),
        (
            Spent(steps=1, input_tokens=99_000, output_tokens=1_000),
            Limits(max_tokens=100_000),
            "token limit reached: 100,000 of 100,000 tokens",
        ),
        (Spent(steps=1, cost_usd=1.2345), Limits(max_cost_usd=1.0), "cost limit reached: $1.2345 of $1.00"),
        (Spent(steps=1, cost_usd=0.5), Limits(max_cost_usd=1.0), None),
        (Spent(steps=1, cost_usd=50.0), Limits(), None),
        (Spent(steps=1, cost_unknown=True), Limits(), None),
        (
            Spent(steps=1, started_at=NOW - 3612),
            Limits(max_wall_s=3600),
            "wall-time limit reached: 1h00m12s of 1h00m00s",
        ),
        (Spent(steps=1, started_at=NOW - 125), Limits(max_wall_s=120), "wall-time limit reached: 2m05s of 2m00s"),
        (Spent(steps=1, started_at=NOW - 45), Limits(max_wall_s=30), "wall-time limit reached: 45s of 30s"),
        (Spent(steps=1, started_at=NOW - 10), Limits(max_wall_s=30), None),
        (Spent(steps=1, started_at=None), Limits(max_wall_s=30), None),
        # the first limit reached wins, in the order steps, tokens, cost, time
        (
            Spent(steps=5, input_tokens=10, cost_usd=9, started_at=0),
            Limits(max_steps=5, max_tokens=1, max_cost_usd=1, max_wall_s=1),
            "step limit reached: 5 of 5 steps",
        ),
        (
            Spent(steps=1, cost_usd=9, started_at=0),
            Limits(max_cost_usd=1, max_wall_s=1),
            "cost limit reached: $9.0000 of $1.00",
        ),
    ],
)
def test_limit_reached(spent: Spent, limits: Limits, reason: str | None) -> None:
    assert limit_reached(spent, limits, NOW) == reason


def test_unknown_cost_under_a_cost_limit_is_said_not_passed() -> None:
    spent = Spent().after_step(Usage(input_tokens=10, output_tokens=10), cost_usd("openai:llama3", MTOK))
    reason = limit_reached(spent, Limits(max_cost_usd=1.0), NOW)
    assert reason is not None and "cannot be enforced" in reason and "$1.00" in reason
    problem = cost_limit_problem("openai:llama3", Limits(max_cost_usd=2.5))
    assert problem is not None and "'openai:llama3'" in problem and "$2.50" in problem and "settings" in problem
    assert cost_limit_problem("openai:llama3", Limits()) is None
    assert cost_limit_problem("openai:gpt-4o", Limits(max_cost_usd=1)) is None
    assert cost_limit_problem("scripted:demo", Limits(max_cost_usd=1)) is None
    assert (
        cost_limit_problem(
            "openai:llama3", Limits(max_cost_usd=1), {"llama3": Price(input_per_mtok=0, output_per_mtok=0)}
        )
        is None
    )


@given(
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.sampled_from(sorted(DEFAULT_PRICES)),
)
def test_cost_is_linear_and_non_negative(inp: int, out: int, model: str) -> None:
    usage = Usage(input_tokens=inp, output_tokens=out)
    cost = cost_usd(f"openai:{model}", usage)
    assert cost is not None and cost >= 0
    assert cost == pytest.approx(
        cost_usd(f"openai:{model}", Usage(input_tokens=inp)) + cost_usd(f"openai:{model}", Usage(output_tokens=out))
    )
