"""The spend ledger's arithmetic: which limit holds a run back and what it says, the lower limit
winning, an operator's override replacing the settings' value."""

from __future__ import annotations

import pytest

from shopfloor.models.ledger import Limits, Usage
from shopfloor.workflows.ledger import _over

pytestmark = pytest.mark.fast


def test_the_lower_limit_wins_and_an_override_replaces_the_operators():
    operator = Limits(runs_per_day=5, cost_usd_per_day=2.0)
    repo_file = Limits(runs_per_day=3, runs_per_month=40)
    assert operator.lower(repo_file) == Limits(runs_per_day=3, runs_per_month=40, cost_usd_per_day=2.0)
    raised = operator.overridden_by(Limits(runs_per_day=9))
    assert raised == Limits(runs_per_day=9, cost_usd_per_day=2.0)
    assert raised.lower(repo_file).runs_per_day == 3  # the repository's own limit still holds


@pytest.mark.parametrize(
    ("limits", "today", "month", "running", "kind", "said"),
    [
        (Limits(max_running=1), Usage(), Usage(), 1, "queue", "acme/x runs at most 1 at once (1 running)"),
        (
            Limits(runs_per_day=2),
            Usage(runs=2),
            Usage(runs=2),
            0,
            "budget",
            "acme/x's daily limit of 2 run(s) is reached (2 today, UTC); it starts when the day rolls over, or "
            "when an operator raises it (`shopfloor budget set acme/x --runs-per-day N`)",
        ),
        (
            Limits(runs_per_month=10),
            Usage(runs=1),
            Usage(runs=10),
            0,
            "budget",
            "monthly limit of 10 run(s) is reached (10 this month, UTC); it starts next month",
        ),
        (
            Limits(cost_usd_per_day=1.5),
            Usage(cost_usd=1.5),
            Usage(cost_usd=1.5),
            0,
            "budget",
            "daily budget of $1.5 is spent ($1.5000 today, UTC)",
        ),
        (
            Limits(cost_usd_per_month=30),
            Usage(),
            Usage(cost_usd=31),
            0,
            "budget",
            "(`shopfloor budget set acme/x --cost-per-month USD`)",
        ),
    ],
)
def test_each_limit_holds_a_run_back_and_says_which(limits, today, month, running, kind, said):
    why, got = _over(limits, today, month, running, "acme/x", "acme/x")
    assert got == kind and said in why, why
    assert _over(limits, Usage(), Usage(), 0, "acme/x", "acme/x") == ("", "")  # below every limit: it fits


def test_the_totals_message_names_the_total_option():
    why, _ = _over(Limits(runs_per_day=0), Usage(), Usage(), 0, "the factory", None)
    assert (
        why.startswith("the factory's daily limit of 0 run(s)")
        and "`shopfloor budget set --total --runs-per-day N`" in why
    )
