"""What the agent loop does when a model step meets the model's limits: a conversation too long for
the context window, and a reply cut off at the output limit.

Pure: the texts the model and the operator read, the bounds, and the names under which the
workflow records these behaviours (so runs recorded before them replay as they ran).

- Too long: the provider refuses the request (OpenAI `context_length_exceeded`, Anthropic "prompt is
  too long"). The step raises `ContextTooLong`; the loop compacts the transcript at once, forced
  (the estimate said it fitted, so the estimate was wrong), and tries the step once more. Too long
  again, or nothing that can be compacted, ends the run as failed with one of the reasons below.
- Cut off: a reply that stopped at the output limit (`finish_reason` "length") without a tool
  call is not an answer yet: the loop asks the model to continue where it stopped, at most
  `MAX_CONTINUATIONS` times, and the answer is the parts joined. Still cut after that, the run
  completes with the joined text and `CUT_OFF_NOTE`, so nobody takes it for a whole answer.
- A cut-off reply with tool calls: its last call may have been cut while its arguments were being
  written, so it is not run; the model reads `CUT_OFF_CALL_ERROR` as that call's result.
"""

from __future__ import annotations

from shopfloor.models.transcript import Message

# Names for workflow.patched: a run recorded before a behaviour existed replays without it.
REACTIVE_COMPACTION = "reactive-compaction"
CONTINUE_CUT_OFF = "continue-cut-off-replies"

MAX_CONTINUATIONS = 3

CONTINUE_NOTE = (
    "Your last reply was cut off at the output limit. Continue exactly where it stopped: do not "
    "repeat anything you already wrote and do not start over; your parts will be joined as they are."
)

CUT_OFF_CALL_ERROR = (
    "your reply was cut off at the output limit while this call was being written, so its arguments "
    "may be incomplete and it was not run. Send it again; if it carries a lot of text (a whole file), "
    "make smaller changes, one call each."
)


class ContextTooLong(Exception):
    """Raised by a ModelStep when the provider refused the conversation as too long for the model.
    Not a failure of the run yet: the loop compacts the transcript and tries the step once more."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def cut_off_note(continuations: int) -> str:
    """Appended to an answer still cut off after `continuations` requests to continue."""
    return (
        f"\n\n[shopfloor: this answer is incomplete: the model's reply was cut off at its output limit "
        f"{continuations + 1} times, and it was asked to continue only {continuations} times]"
    )


def too_long_after_compaction(model: str, detail: str) -> str:
    return f"the conversation is too long for {model} even after compaction ({detail})"


def nothing_to_compact(model: str, detail: str) -> str:
    return (
        f"the conversation is too long for {model}, and there is nothing older in it to compact "
        f"(the goal and the newest turn alone do not fit) ({detail})"
    )


def too_long_to_compact(model: str, detail: str) -> str:
    return f"the conversation is too long for {model}, and so is the part of it to summarize ({detail})"


def mark_cut_off_call(message: Message) -> Message:
    """A reply cut off at the output limit, its last tool call (the one that may have been cut
    while being written) refused with `CUT_OFF_CALL_ERROR`; the calls before it were complete."""
    if not message.tool_calls:
        return message
    *whole, last = message.tool_calls
    refused = last.model_copy(update={"arguments_error": CUT_OFF_CALL_ERROR})
    return message.model_copy(update={"tool_calls": [*whole, refused]})


def joined_answer(parts: list[str], last: str) -> str:
    """The answer a run of cut-off replies gives: each part continues the one before it, as is."""
    return "".join([*parts, last])
