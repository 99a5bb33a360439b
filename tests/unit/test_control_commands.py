"""Writers' control comments parsed strictly: `/shopfloor steer [--model P:M] [text]` and
`/shopfloor raise-limits --steps N --cost USD`, within the bounds a comment may raise limits to."""

from __future__ import annotations

import pytest

from shopfloor.agents.control_commands import (
    MAX_COMMENT_COST_USD,
    MAX_COMMENT_STEPS,
    ControlRefused,
    parse_raise_limits,
    parse_steer,
)
from shopfloor.models.agent_run import LimitsRaise

pytestmark = pytest.mark.fast


def test_steer_takes_a_message_a_model_or_both():
    assert parse_steer("also handle negative numbers") == (None, "also handle negative numbers")
    assert parse_steer("--model openai:gpt-4o") == ("openai:gpt-4o", "")
    assert parse_steer("--model openai:gpt-4o  and be brief\n please") == ("openai:gpt-4o", "and be brief please")


def test_a_steer_message_is_sanitized_folded_and_capped():
    _, text = parse_steer("look\u200b here <!-- hidden --> now " + "x" * 5000)
    assert "\u200b" not in text and "hidden" not in text and len(text) <= 2000


@pytest.mark.parametrize("args", ["", "   ", "--model", "--models x:y hi", "--force hi"])
def test_a_steer_that_says_nothing_or_has_an_unknown_option_is_refused(args):
    with pytest.raises(ControlRefused):
        parse_steer(args)


def test_raise_limits_reads_steps_and_cost():
    assert parse_raise_limits("--steps 60") == LimitsRaise(max_steps=60)
    assert parse_raise_limits("--cost 2.5") == LimitsRaise(max_cost_usd=2.5)
    assert parse_raise_limits("--cost $3 --steps 10") == LimitsRaise(max_steps=10, max_cost_usd=3.0)
    assert parse_raise_limits(f"--steps {MAX_COMMENT_STEPS} --cost {MAX_COMMENT_COST_USD}") == LimitsRaise(
        max_steps=MAX_COMMENT_STEPS, max_cost_usd=MAX_COMMENT_COST_USD
    )


@pytest.mark.parametrize(
    "args",
    [
        "",
        "--steps",
        "--steps 0",
        "--steps -5",
        "--steps 1e3",
        "--steps 10.5",
        f"--steps {MAX_COMMENT_STEPS + 1}",
        "--cost 0",
        "--cost nan",
        "--cost inf",
        "--cost 1e1",
        "--cost -1",
        f"--cost {MAX_COMMENT_COST_USD + 0.01}",
        "--steps 5 --steps 6",
        "--tokens 100",
        "--wall-s 60",
        "--steps 5 please",
        "steps 5",
    ],
)
def test_raise_limits_out_of_bounds_or_malformed_is_refused_without_echoing(args):
    with pytest.raises(ControlRefused) as refused:
        parse_raise_limits(args)
    assert "please" not in str(refused.value) and "1e" not in str(refused.value)
