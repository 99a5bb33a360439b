"""Doom-loop detection: repeated calls and repeated errors warn once, then stop the run."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopfloor.agents.doom_loop import DoomLoopState, observe, stuck_reason, warning_message

pytestmark = pytest.mark.fast

OK = None


def run(seq: list[tuple[str, str | None]], *, threshold: int = 3, state: DoomLoopState | None = None) -> list[str]:
    """The signals for a sequence of (call_key, error_key) observations."""
    state = state or DoomLoopState()
    signals = []
    for call_key, error_key in seq:
        state, signal, _ = observe(state, call_key=call_key, error_key=error_key, threshold=threshold)
        signals.append(signal)
    return signals


@pytest.mark.parametrize(
    ("name", "seq", "expected"),
    [
        ("distinct calls", [("a", OK), ("b", OK), ("c", OK), ("d", OK)], ["ok"] * 4),
        ("same call 3x warns", [("a", OK)] * 3, ["ok", "ok", "warn"]),
        ("same call 4x is stuck", [("a", OK)] * 4, ["ok", "ok", "warn", "stuck"]),
        ("two repeats only", [("a", OK), ("b", OK), ("a", OK), ("c", OK)], ["ok"] * 4),
        (
            "alternating A,B,A,B,A,B",
            [("a", OK), ("b", OK)] * 3,
            ["ok", "ok", "ok", "ok", "warn", "warn"],
        ),
        (
            "alternating goes on -> stuck",
            [("a", OK), ("b", OK)] * 4,
            ["ok", "ok", "ok", "ok", "warn", "warn", "stuck", "stuck"],
        ),
        (
            "progress in between does not reset",
            [("a", OK), ("x", OK), ("a", OK), ("y", OK), ("a", OK), ("z", OK), ("a", OK)],
            ["ok", "ok", "ok", "ok", "warn", "ok", "stuck"],
        ),
        (
            "same error, different args",
            [("a", "E"), ("b", "E"), ("c", "E"), ("d", "E")],
            ["ok", "ok", "warn", "stuck"],
        ),
        (
            "errors differ",
            [("a", "E1"), ("b", "E2"), ("c", "E3"), ("d", "E1"), ("e", "E2")],
            ["ok"] * 5,
        ),
        (
            "successes between errors do not reset",
            [("a", "E"), ("b", OK), ("c", "E"), ("d", OK), ("e", "E")],
            ["ok", "ok", "ok", "ok", "warn"],
        ),
        (
            "after an error warning, a different error is fine",
            [("a", "E"), ("b", "E"), ("c", "E"), ("d", "F"), ("e", OK)],
            ["ok", "ok", "warn", "ok", "ok"],
        ),
        (
            "after a call warning, other calls are fine",
            [("a", OK)] * 3 + [("b", OK), ("c", OK)],
            ["ok", "ok", "warn", "ok", "ok"],
        ),
        (
            "a second loop on another key warns on its own",
            [("a", OK)] * 3 + [("b", OK)] * 3,
            ["ok", "ok", "warn", "ok", "ok", "warn"],
        ),
    ],
)
def test_signals(name: str, seq: list[tuple[str, str | None]], expected: list[str]) -> None:
    assert run(seq) == expected, name


def test_window_forgets_old_calls() -> None:
    state = DoomLoopState(window=5)
    seq = [("a", OK), ("a", OK)] + [(f"x{i}", OK) for i in range(4)] + [("a", OK)]
    assert run(seq, state=state) == ["ok"] * 7


def test_threshold_is_configurable() -> None:
    assert run([("a", OK)] * 3, threshold=2) == ["ok", "warn", "stuck"]
    assert run([("a", OK)] * 5, threshold=5) == ["ok"] * 4 + ["warn"]
    with pytest.raises(ValueError):
        observe(DoomLoopState(), call_key="a", error_key=None, threshold=1)


def test_texts() -> None:
    state = DoomLoopState()
    for _ in range(2):
        state, signal, text = observe(state, call_key="k", error_key=None, tool="grep")
        assert (signal, text) == ("ok", "")
    state, signal, text = observe(state, call_key="k", error_key=None, tool="grep")
    assert signal == "warn"
    assert text.startswith("You have called grep with the same arguments 3 times; the result will not change.")
    assert "finish" in text
    state, signal, text = observe(state, call_key="k", error_key=None, tool="grep")
    assert signal == "stuck"
    assert text.startswith("stuck:") and "grep" in text and "after a warning" in text


def test_error_warning_quotes_the_error() -> None:
    state = DoomLoopState()
    for i in range(3):
        state, signal, text = observe(
            state, call_key=f"c{i}", error_key="e1", tool="edit_file", error_text="old text not found in app.py"
        )
    assert signal == "warn"
    assert "same error 3 times" in text and "old text not found in app.py" in text


def test_both_rules_at_once_give_one_combined_warning() -> None:
    state = DoomLoopState()
    for _ in range(3):
        state, signal, text = observe(state, call_key="k", error_key="E", tool="run_tests")
    assert signal == "warn"
    assert "called run_tests" in text and "same error" in text
    assert state.warnings == 1


def test_workspace_change_starts_afresh() -> None:
    state = DoomLoopState()
    for _ in range(3):
        state, signal, _ = observe(state, call_key="tests", error_key="F")
    assert signal == "warn"
    state, signal, _ = observe(state, call_key="edit", error_key=None, workspace_changed=True)
    assert signal == "ok"
    assert state.calls == ["edit"] and state.warned_calls == [] and state.warned_errors == []
    state, signal, _ = observe(state, call_key="tests", error_key="F")
    assert signal == "ok"  # the same tests after an edit: a new attempt, not a loop


def test_observe_does_not_modify_its_input() -> None:
    state = DoomLoopState()
    before = state.model_dump()
    observe(state, call_key="a", error_key="E")
    assert state.model_dump() == before


def test_long_keys_are_stored_as_digests() -> None:
    long_error = "Traceback: " + "x" * 5000
    state = DoomLoopState()
    for i in range(3):
        state, signal, _ = observe(state, call_key=f"c{i}", error_key=long_error)
    assert signal == "warn"
    assert all(len(e) <= 80 for e in state.errors)


def test_state_round_trips_through_json() -> None:
    state = DoomLoopState()
    state, _, _ = observe(state, call_key="a", error_key=None)
    state, _, _ = observe(state, call_key="a", error_key=None)
    restored = DoomLoopState.model_validate_json(state.model_dump_json())
    _, signal, _ = observe(restored, call_key="a", error_key=None)
    assert signal == "warn"


def test_helpers_without_names() -> None:
    assert "the same tool call" in warning_message("call", count=3)
    assert "same error 3 times" in warning_message("error", count=3)
    assert "the same tool call" in stuck_reason("call", count=4)
    assert "error" in stuck_reason("error", count=4)


@given(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.one_of(st.none(), st.sampled_from("EFG"))), max_size=120),
    st.integers(min_value=1, max_value=30),
)
def test_properties(seq: list[tuple[str, str | None]], window: int) -> None:
    state = DoomLoopState(window=window)
    warned: set[str] = set()
    for call_key, error_key in seq:
        prev_calls = state.calls
        state, signal, text = observe(state, call_key=call_key, error_key=error_key)
        # bounded memory
        assert len(state.calls) == len(state.errors) <= window
        assert len(state.warned_calls) <= window and len(state.warned_errors) <= window
        # never "stuck" without an earlier warning on that call or error
        if signal == "stuck":
            assert call_key in warned or (error_key is not None and error_key in warned)
        if signal == "warn":
            if (prev_calls + [call_key])[-window:].count(call_key) >= 3:
                warned.add(call_key)
            if error_key is not None:
                warned.add(error_key)
        assert (signal == "ok") == (text == "")
