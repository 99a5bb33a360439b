"""The arguments of writers' control comments, parsed strictly: `/shopfloor steer [--model P:M] [text]`
and `/shopfloor raise-limits --steps N --cost USD`, with the bounds a comment may raise limits to.
Pure: no I/O.

A comment is not an operator's terminal: how far it may raise an agent's limits is capped
(MAX_COMMENT_STEPS, MAX_COMMENT_COST_USD) so one comment cannot hand a run an unbounded budget;
the operator's `shopfloor raise-limits` has no such cap. Refusals never repeat the comment's text.
"""

from __future__ import annotations

import math

from shopfloor.agents.untrusted_text import sanitize
from shopfloor.models.agent_run import LimitsRaise

MAX_COMMENT_STEPS = 200
MAX_COMMENT_COST_USD = 20.0
MAX_STEER_CHARS = 2000
RAISE_USAGE = (
    f"use `/shopfloor raise-limits --steps N --cost USD` (either or both; at most {MAX_COMMENT_STEPS} steps "
    f"and ${MAX_COMMENT_COST_USD:g} from a comment)"
)


class ControlRefused(Exception):
    """A control comment that does nothing: the message says why, in words fit for a reply."""


def parse_steer(args: str) -> tuple[str | None, str]:
    """(model or None, message) of `/shopfloor steer [--model P:M] [message]`."""
    words = args.split(None, 2)
    model: str | None = None
    text = args
    if words and words[0] == "--model":
        if len(words) < 2:
            raise ControlRefused("`--model` names no model: use `/shopfloor steer --model provider:model`")
        model = words[1]
        text = words[2] if len(words) > 2 else ""
    elif words and words[0].startswith("--"):
        raise ControlRefused("the only option of `/shopfloor steer` is `--model provider:model`")
    text = " ".join(sanitize(text).split())[:MAX_STEER_CHARS]
    if model is None and not text:
        raise ControlRefused("there is no message: use `/shopfloor steer <message>` or `--model provider:model`")
    return model, text


def parse_raise_limits(args: str) -> LimitsRaise:
    """`--steps N` and/or `--cost USD`, each once, within the comment bounds; else ControlRefused."""
    words = args.split()
    if not words or len(words) % 2:
        raise ControlRefused(RAISE_USAGE)
    given: dict[str, str] = {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag not in ("--steps", "--cost") or flag in given:
            raise ControlRefused(RAISE_USAGE)
        given[flag] = value
    steps: int | None = None
    cost: float | None = None
    if "--steps" in given:
        raw = given["--steps"]
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_COMMENT_STEPS:
            raise ControlRefused(f"`--steps` takes a whole number from 1 to {MAX_COMMENT_STEPS}")
        steps = int(raw)
    if "--cost" in given:
        raw = given["--cost"].removeprefix("$")
        try:
            cost = float(raw)
        except ValueError:
            cost = math.nan
        if not (math.isfinite(cost) and 0 < cost <= MAX_COMMENT_COST_USD) or not raw.replace(".", "", 1).isdigit():
            raise ControlRefused(f"`--cost` takes an amount in USD above 0 and at most {MAX_COMMENT_COST_USD:g}")
    return LimitsRaise(max_steps=steps, max_cost_usd=cost)
