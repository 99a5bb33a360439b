"""The progress comment: each final state says so in words, the marker ends the body, untrusted
text cannot mention anyone or break the markup, and long timelines stay bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shopfloor.agents.progress import (
    MAX_TIMELINE,
    ProgressLinks,
    ProgressView,
    TimelineEntry,
    render_progress,
    untrusted,
)
from shopfloor.models.github_ops import comment_marker, find_markers

pytestmark = pytest.mark.fast

WF = "issue/acme/app/7"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LINKS = ProgressLinks(
    pr_url="https://github.com/acme/app/pull/8",
    workflow_url="http://localhost:8233/namespaces/default/workflows/issue%2Facme%2Fapp%2F7",
    branch_url="https://github.com/acme/app/tree/shopfloor/issue-7",
)


def view(**kw) -> ProgressView:
    base = {
        "workflow_id": WF,
        "repo": "acme/app",
        "number": 7,
        "stage": "fix",
        "round": 1,
        "step": 12,
        "cost_usd": 0.42,
        "tokens": 123_456,
        "links": LINKS,
        "updated_at": T0,
    }
    return ProgressView(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "sentence"),
    [
        ({"state": "running"}, "**Running** — stage fix, review round 1, step 12."),
        (
            {"state": "waiting", "stage": "merge", "waiting_for": "approval"},
            "**Waiting** for a maintainer's approval: comment `/shopfloor approve` on this issue (stage merge, review round 1, step 12).",
        ),
        (
            {"state": "merged", "stage": "done"},
            "**Final state: merged.** The fix in [the pull request](https://github.com/acme/app/pull/8) is merged and the issue is closed.",
        ),
        (
            {
                "state": "parked",
                "stage": "policy",
                "waiting_for": "fix_command",
                "reason": "fixability 0.3 is under 0.6",
            },
            "**Final state: waiting for a human.** The run is parked until a maintainer to ask for a fix: comment `/shopfloor fix` on this issue. Why: ` fixability 0.3 is under 0.6 `.",
        ),
        (
            {"state": "parked", "waiting_for": None},
            "**Final state: waiting for a human.** The run is parked until a human to decide how to go on.",
        ),
        (
            {"state": "failed", "stage": "review", "reason": "CI failed 3 times: test_login"},
            "**Final state: failed** at review. Why: ` CI failed 3 times: test_login `.",
        ),
        (
            {"state": "cancelled", "reason": "stopped by alice with /shopfloor stop"},
            "**Final state: cancelled** at fix; nothing more will happen in this run. ` stopped by alice with /shopfloor stop `.",
        ),
        (
            {"state": "salvaged", "reason": "tests in tests/test_auth.py still fail"},
            "**Final state: salvaged** — stopped at fix before finishing. Work so far is saved in [the branch](https://github.com/acme/app/tree/shopfloor/issue-7). Left to do: ` tests in tests/test_auth.py still fail `.",
        ),
    ],
)
def test_each_state_renders_its_explicit_sentence(kw, sentence):
    body = render_progress(view(**kw))
    assert sentence in body.splitlines()


def test_heading_labels_links_and_marker_at_the_end():
    body = render_progress(view(state="parked", waiting_for="approval"))
    lines = body.splitlines()
    assert lines[0] == "### shopfloor · acme/app#7 · needs a human"
    assert lines[-1] == comment_marker(WF, "progress")
    assert [(m.workflow_id, m.kind) for m in find_markers(body)] == [(WF, "progress")]
    assert "Links: [pull request](https://github.com/acme/app/pull/8) · [run in the Temporal UI](" in body
    assert "Spent: 12 steps, 123,456 tokens, $0.42." in lines
    assert "<sub>Workflow `issue/acme/app/7` · updated 2025-03-01 12:00 UTC</sub>" in lines


def test_unsafe_links_are_left_out():
    body = render_progress(view(links=ProgressLinks(pr_url="javascript:alert(1)", workflow_url="https://x/a) [y](z")))
    assert "javascript" not in body and "Links:" not in body


def test_the_stage_table():
    timeline = [
        TimelineEntry(
            stage="triage",
            started_at=T0,
            ended_at=T0 + timedelta(minutes=2),
            steps=4,
            cost_usd=0.05,
            outcome="fixable (0.8)",
        ),
        TimelineEntry(stage="fix", started_at=T0 + timedelta(minutes=2), steps=8, cost_usd=0.37),
    ]
    lines = render_progress(view(timeline=timeline)).splitlines()
    assert "| Stage | Started | Ended | Steps | Cost | Outcome |" in lines
    assert "| triage | 2025-03-01 12:00 UTC | 2025-03-01 12:02 UTC | 4 | $0.05 | ` fixable (0.8) ` |" in lines
    assert "| fix | 2025-03-01 12:02 UTC | – | 8 | $0.37 | running |" in lines


HOSTILE = "@alice see #1 <!-- hidden --> </details> -->\n\n| a | b |\n`rm -rf /`\u200b [x](http://evil) ``` <b>bold</b>"


def test_untrusted_text_is_one_inert_code_span():
    span = untrusted(HOSTILE)
    # One line, fenced longer than any backtick run inside, hidden comment and zero-width gone.
    assert "\n" not in span and span.startswith("```` ") and span.endswith(" ````")
    inner = span[5:-5]
    assert "````" not in inner and "hidden" not in inner and "\u200b" not in inner
    assert "@alice" in inner  # shown as written, but inside code: GitHub notifies no one
    assert untrusted("") == "`(none given)`" and untrusted("x" * 1000).endswith("… `")


def test_untrusted_reason_cannot_break_the_comment():
    body = render_progress(
        view(
            state="failed",
            reason=HOSTILE,
            waiting_for="@bob do it",
            timeline=[TimelineEntry(stage="fix", outcome="@carol | x\n<!--")],
        )
    )
    # Every @ sits inside a code span: outside the spans no mention is left.
    outside = "".join(part for i, part in enumerate(_split_code(body)) if i % 2 == 0)
    assert "@" not in outside and "<!--" not in outside.replace(comment_marker(WF, "progress"), "")
    assert "<!-- hidden" not in body and body.count("<!--") == 1  # only the marker
    table_row = next(line for line in body.splitlines() if line.startswith("| fix |"))
    assert "@carol \\| x" in table_row  # `|` escaped: the cell is not split


def _split_code(markdown: str) -> list[str]:
    """Alternating outside/inside of inline code spans (fences of any length)."""
    import re

    parts, pos = [], 0
    for m in re.finditer(r"(`+)(.+?)\1", markdown, re.DOTALL):
        parts += [markdown[pos : m.start()], m.group(2)]
        pos = m.end()
    return [*parts, markdown[pos:]]


def test_long_timelines_are_bounded():
    entries = [TimelineEntry(stage="review" if i % 2 else "fix", steps=i) for i in range(50)]
    v = view(timeline=entries)
    assert len(v.timeline) == MAX_TIMELINE and v.timeline_dropped == 30 and v.timeline[0].steps == 30
    body = render_progress(v)
    assert "| … | | | | | 30 earlier entries not shown |" in body
    assert sum(line.startswith(("| fix |", "| review |")) for line in body.splitlines()) == MAX_TIMELINE
    # Round-trips through history (JSON) unchanged.
    assert ProgressView.model_validate_json(v.model_dump_json()) == v


def test_final_flag():
    assert not view(state="running").final and not view(state="waiting").final
    assert all(view(state=s).final for s in ("merged", "parked", "failed", "cancelled", "salvaged"))


def test_the_rendered_comment_keeps_a_single_marker_when_upserted():
    """upsert_comment adds the marker unless the body already carries it: the rendered progress
    comment ends with its own, so the posted comment must hold exactly one."""
    from shopfloor.models.github_ops import comment_marker, with_marker

    view = ProgressView(workflow_id="issue/acme/shop/7", repo="acme/shop", number=7, stage="fix", state="running")
    body = with_marker(render_progress(view), "issue/acme/shop/7", "progress")
    assert body.count(comment_marker("issue/acme/shop/7", "progress")) == 1
    assert with_marker("plain", "issue/acme/shop/7", "progress").startswith(
        comment_marker("issue/acme/shop/7", "progress")
    )


def test_a_parked_runs_problems_are_each_listed_whole():
    problems = [f"`hooks.after_edit.{i}.file`: unknown key" for i in range(3)] + ["x" * 1000]
    body = render_progress(view(state="parked", waiting_for="policy", reason="; ".join(problems), problems=problems))
    assert "Why: 4 problems, listed below." in body
    for p in problems[:3]:
        assert f"\n- `` {p} ``" in body
    (long,) = [line for line in body.splitlines() if "xxx" in line]
    assert long.count("x") == 399 and long.endswith("… `")  # one cap per problem, not one for them all
    # Not parked any more: the list goes with the state.
    assert "\n- " not in render_progress(view(state="running", problems=problems))
