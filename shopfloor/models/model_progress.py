"""What a running model call shows while the model writes: the heartbeat details of the
model_step and compact_transcript activities, read back by `shopfloor follow` and `shopfloor agent`.

Heartbeat details live in the activity's pending state on the Temporal server, not in workflow
history, and are bounded: the last TEXT_TAIL_CHARS characters and the count of all of them.
"""

from __future__ import annotations

from pydantic import BaseModel

TEXT_TAIL_CHARS = 2_000


class ModelProgress(BaseModel):
    detail: str = ""  # "openai:gpt-4o step 3": which call
    attempt: int = 1  # the activity attempt that wrote the text (a retry starts it over)
    text: str = ""  # the last TEXT_TAIL_CHARS characters written so far
    chars: int = 0  # how many characters were written so far (text is the end of them)

    def after(self, shown: int) -> tuple[str, bool]:
        """The text past the first `shown` characters, and whether some of it is no longer
        kept (more than TEXT_TAIL_CHARS came since)."""
        start = self.chars - len(self.text)
        if shown >= self.chars:
            return "", False
        if shown < start:
            return self.text, True
        return self.text[shown - start :], False
