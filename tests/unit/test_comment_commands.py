"""`/shopfloor <command> [args]` parsing: first command line wins; code and quotes do not count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopfloor.agents.comment_commands import KNOWN, parse_command
from shopfloor.models.inbox import CommentCommand

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_each_command(name: str) -> None:
    assert parse_command(f"/shopfloor {name}") == CommentCommand(name=name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Looks bad.\n/shopfloor fix the login bug\nthanks", CommentCommand(name="fix", args="the login bug")),
        ("/shopfloor review\n/shopfloor approve", CommentCommand(name="review")),
        ("  /shopfloor   RETRY   with more budget  ", CommentCommand(name="retry", args="with more budget")),
        ("> /shopfloor approve\n/shopfloor stop", CommentCommand(name="stop")),
        ("```\n/shopfloor approve\n```\n/shopfloor pause", CommentCommand(name="pause")),
        ("~~~~\n/shopfloor approve\n~~~\n/shopfloor approve\n~~~~\n/shopfloor resume", CommentCommand(name="resume")),
        ("    /shopfloor approve", None),  # indented code block
        ("/shopfloor foo\n/shopfloor fix", None),  # the first command line decides: unknown
        ("/shopfloor", None),
        ("/shopfloorfix", None),
        ("please /shopfloor fix", None),  # not at the start of a line
        ("/shop\u200bfloor fix", CommentCommand(name="fix")),  # hidden chars cannot hide a command
        ("<!-- /shopfloor approve -->\n/shopfloor review", CommentCommand(name="review")),
        ("", None),
        (None, None),
    ],
)
def test_parsing(text: str | None, expected: CommentCommand | None) -> None:
    assert parse_command(text) == expected


def test_args_are_capped() -> None:
    command = parse_command("/shopfloor fix " + "x" * 5000)
    assert command is not None and len(command.args) == 500


def test_write_commands() -> None:
    assert CommentCommand(name="approve").needs_write and not CommentCommand(name="stop").needs_write


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["/shopfloor", " ", "fix", "review", ">", "```", "~~~", "\n", "\t", "\u200b", "<!--", "-->"])
        | st.text(max_size=5),
        max_size=60,
    ).map("".join)
)
def test_never_raises(text: str) -> None:
    command = parse_command(text)
    assert command is None or command.name in KNOWN


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/shopfloor fix please also handle negative numbers", ("fix", "please also handle negative numbers")),
        ("/shopfloor also handle negative numbers", ("fix", "also handle negative numbers")),
        ("/shopfloor Please   use abs() here\nthanks", ("fix", "Please   use abs() here")),
        ("> /shopfloor also handle negatives\n/shopfloor approve", ("approve", "")),  # quoted: not the command
        ("/shopfloor aprove", None),  # a typo of one word never starts work
        ("/shopfloor aprove   ", None),
        ("/shopfloor steer use the other helper", ("steer", "use the other helper")),  # a known command stays itself
    ],
)
def test_instructions_are_a_fix_with_them_and_a_lone_unknown_word_is_nothing(
    text: str, expected: tuple[str, str] | None
) -> None:
    command = parse_command(text)
    assert (command.name, command.args) == expected if command else expected is None


def test_instructions_are_capped_like_args() -> None:
    command = parse_command("/shopfloor " + "word " * 400)
    assert command is not None and command.name == "fix" and len(command.args) == 500
