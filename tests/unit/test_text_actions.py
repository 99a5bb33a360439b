"""Text actions: only line-initial `Action: name(...)` lines run, with literal keyword arguments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopfloor.agents.text_actions import parse_text_actions, text_action_instructions
from shopfloor.agents.tools import TOOLS
from shopfloor.models.transcript import ToolCall

pytestmark = pytest.mark.fast

KNOWN = set(TOOLS)


def parsed(text: str) -> list[tuple[str, dict, str | None]]:
    return [(c.name, c.arguments, c.arguments_error) for c in parse_text_actions(text, KNOWN)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Action: grep(pattern='Login')", [("grep", {"pattern": "Login"}, None)]),
        (
            'Action:read_file(path="a.py", offset=3, limit=10)',
            [("read_file", {"path": "a.py", "offset": 3, "limit": 10}, None)],
        ),
        ("   Action:   list_dir  ( path = 'src' )", [("list_dir", {"path": "src"}, None)]),
        ("\tAction: git_diff()", [("git_diff", {}, None)]),
        (
            "Action: grep(pattern='x', ignore_case=True, glob=None)",
            [("grep", {"pattern": "x", "ignore_case": True, "glob": None}, None)],
        ),
        (
            "Action: grep(pattern='x', ignore_case=true, glob=null)",
            [("grep", {"pattern": "x", "ignore_case": True, "glob": None}, None)],
        ),
        (
            "Action: run_command(command='ls', timeout_s=2.5)",
            [("run_command", {"command": "ls", "timeout_s": 2.5}, None)],
        ),
        (
            "Action: x(items=[1, (2, 3)], opts={'a': [True, None]}, n=-4)",
            [("x", {"items": [1, [2, 3]], "opts": {"a": [True, None]}, "n": -4}, None)],
        ),
        ("Action: grep(pattern='a)b(c')", [("grep", {"pattern": "a)b(c"}, None)]),
        ("Action: grep(pattern='x')  # look for x", [("grep", {"pattern": "x"}, None)]),
        ("Action: grep(pattern='x') and then more text", [("grep", {"pattern": "x"}, None)]),
        # not actions: mid-line, quoted, listed, prose, other words
        ("I ran Action: grep(pattern='x') before.", []),
        ("> Action: grep(pattern='x')", []),
        ("- Action: grep(pattern='x')", []),
        ("Action: I will now read the file.", []),
        ("Action grep(pattern='x')", []),
        ("action: grep(pattern='x')", []),
        ("Action: tools.grep(pattern='x')", []),
        ("", []),
    ],
)
def test_single_lines(text: str, expected: list) -> None:
    assert parsed(text) == expected


@pytest.mark.parametrize(
    ("text", "error_part"),
    [
        ("Action: grep('x')", "positional arguments are not supported"),
        ("Action: grep(pattern=x)", "values must be literals"),
        ("Action: grep(pattern='a' + 'b')", "values must be literals"),
        ("Action: grep(pattern=open('/etc/passwd').read())", "values must be literals"),
        ("Action: grep(**{'pattern': 'x'})", "**arguments are not supported"),
        ("Action: grep(pattern=b'x')", "unsupported value bytes"),
        ("Action: grep(pattern={1, 2})", "unsupported value set"),
        ("Action: grep(pattern=1j)", "unsupported value complex"),
        ("Action: grep(pattern=1e999)", "unsupported value float"),
        ("Action: grep(opts={1: 'a'})", "dictionary keys must be strings"),
        ("Action: grep(pattern='x', pattern='y')", "argument 'pattern' is given twice"),
        ("Action: grep(pattern='x'", "could not parse"),
        ("Action: grep(pattern='x]", "could not parse"),
        ('Action: write_file(path="a", content="""never closed)', "could not parse"),
    ],
)
def test_bad_arguments_are_returned_with_an_error(text: str, error_part: str) -> None:
    [call] = parse_text_actions(text, KNOWN)
    assert call.name == "grep" or call.name == "write_file"
    assert call.arguments == {}
    assert call.arguments_error is not None and error_part in call.arguments_error


def test_nothing_is_evaluated() -> None:
    # A call in an argument is rejected, never run.
    [call] = parse_text_actions("Action: grep(pattern=__import__('os').system('false'))", KNOWN)
    assert call.arguments_error is not None


def test_several_actions_get_ordered_ids() -> None:
    text = "First:\nAction: grep(pattern='a')\nAction: read_file(path='b')\nThen\nAction: glob(pattern='*.py')\n"
    calls = parse_text_actions(text, KNOWN)
    assert [(c.id, c.name) for c in calls] == [("text_0", "grep"), ("text_1", "read_file"), ("text_2", "glob")]


def test_multi_line_arguments() -> None:
    text = '''I'll write the file.
Action: write_file(
    path="app/auth.py",
    content="""def login(user):
Action: grep(pattern="inside the content")
```
    return True
""",
)
Action: run_tests()
'''
    calls = parse_text_actions(text, KNOWN)
    assert [c.name for c in calls] == ["write_file", "run_tests"]
    assert calls[0].arguments == {
        "path": "app/auth.py",
        "content": 'def login(user):\nAction: grep(pattern="inside the content")\n```\n    return True\n',
    }
    assert calls[1].id == "text_1"


def test_fenced_blocks_and_quotes_do_not_count() -> None:
    text = """Recap of what I did:
```
Action: edit_file(path='a', old='x', new='y')
```
~~~text
Action: run_command(command='rm -rf build')
~~~
> Action: write_file(path='b', content='')
>   Action: write_file(path='c', content='')
Now the real one:
Action: git_diff()
"""
    assert parsed(text) == [("git_diff", {}, None)]


def test_an_unclosed_fence_hides_the_rest() -> None:
    assert parsed("```python\nAction: git_diff()\n") == []


def test_mismatched_fence_chars_do_not_close() -> None:
    assert parsed("```\n~~~\nAction: git_diff()\n```\nAction: list_dir()") == [("list_dir", {}, None)]


def test_observation_ends_parsing() -> None:
    text = "Action: grep(pattern='x')\nObservation: found x in a.py\nAction: read_file(path='a.py')\n"
    assert parsed(text) == [("grep", {"pattern": "x"}, None)]


def test_unknown_tools_are_returned_and_case_is_corrected() -> None:
    calls = parse_text_actions("Action: frobnicate(x=1)\nAction: Read_File(path='a')", KNOWN)
    assert [(c.name, c.arguments) for c in calls] == [("frobnicate", {"x": 1}), ("read_file", {"path": "a"})]


def test_ambiguous_case_is_not_corrected() -> None:
    [call] = parse_text_actions("Action: GREP(pattern='x')", {"grep", "Grep"})
    assert call.name == "GREP"


def test_crlf_and_unicode_line_breaks() -> None:
    text = "Intro\r\nAction: grep(pattern='a')\r\nAction: read_file(path='b\u2028c')\r\n"
    assert parsed(text) == [("grep", {"pattern": "a"}, None), ("read_file", {"path": "b\u2028c"}, None)]


@pytest.mark.parametrize(
    "text",
    [
        "Action: grep(pattern='x'\nAction: list_dir(path='.')\n",
        'Action: write_file(path="a", content="""\nAction: run_command(command="rm -rf build")\n',
    ],
)
def test_an_unclosed_action_stops_parsing(text: str) -> None:
    # The lines after it may be what was meant as its arguments: they never run as actions.
    calls = parse_text_actions(text, KNOWN)
    assert len(calls) == 1 and calls[0].arguments_error is not None


def test_a_closed_but_bad_action_does_not_hide_the_next_one() -> None:
    calls = parse_text_actions("Action: grep(pattern=x)\nAction: list_dir(path='.')\n", KNOWN)
    assert [(c.name, c.arguments_error is None) for c in calls] == [("grep", False), ("list_dir", True)]


def test_returns_tool_calls() -> None:
    [call] = parse_text_actions("Action: grep(pattern='x')", KNOWN)
    assert isinstance(call, ToolCall) and call.id == "text_0"


def test_instructions() -> None:
    specs = [TOOLS[n].spec() for n in ("read_file", "grep", "git_diff")]
    text = text_action_instructions(specs)
    assert "Action:" in text and "start of the line" in text
    assert "read_file(path: str, offset: int = 1, limit: int = 400)" in text
    assert "grep(pattern: str, path: str = '.', glob: str | None = None" in text
    assert "git_diff(path: str | None = None)" in text
    assert "File path relative to the repository root." in text
    assert "triple quotes" in text and "next message" in text
    assert text_action_instructions(specs) == text
    assert "(none)" in text_action_instructions([])


def test_the_instruction_example_parses() -> None:
    text = text_action_instructions([])
    example = next(line for line in text.splitlines() if line.startswith("Action: "))
    [call] = parse_text_actions(example, set())
    assert call.arguments == {"arg": "value", "other": 2} and call.arguments_error is None


@given(st.text(max_size=400))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    calls = parse_text_actions(text, KNOWN)
    assert [c.id for c in calls] == [f"text_{i}" for i in range(len(calls))]


fragments = st.sampled_from(
    [
        "Action: ",
        "grep",
        "(",
        ")",
        "pattern=",
        "'",
        '"',
        '"""',
        "'''",
        "\n",
        " ",
        "```",
        "> ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "x",
        "1",
        "\\",
        "#",
        "Observation:",
        "**",
        "=",
        "\t",
        "\r",
        "\x00",
        "é",
        "λ",
    ]
)


@given(st.lists(fragments, max_size=60).map("".join))
def test_never_raises_on_action_like_text(text: str) -> None:
    for call in parse_text_actions(text, KNOWN):
        assert isinstance(call.arguments, dict)
        assert call.arguments == {} or call.arguments_error is None


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=50))
def test_string_values_round_trip(value: str) -> None:
    [call] = parse_text_actions(f"Action: grep(pattern={value!r})", KNOWN)
    assert call.arguments == {"pattern": value}
