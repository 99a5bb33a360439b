"""One evaluation task, in SWE-bench's shape: a repository at a base commit, an issue's text, and
a hidden check (tests that must go from failing to passing, and tests that must keep passing).

SWE-bench files load as they are: their FAIL_TO_PASS and PASS_TO_PASS are JSON-encoded lists
in a string, and fields shopfloor does not use (version, hints_text, the gold `patch`, ...) are
dropped; the gold `patch` is kept for checking a suite, and never shown to an agent. `repo_path` (shopfloor's own field) is where the
repository's git directory is on the worker's machine; a SWE-bench file gets it from
`--repos DIR` (DIR/owner__name or DIR/owner/name).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

INSTANCE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_TEST_COMMAND = "python -m pytest -q -p no:cacheprovider"


class EvalTask(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    instance_id: str
    repo: str  # "owner/name" as SWE-bench names it, or a name of the suite's own
    base_commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    problem_statement: str = Field(min_length=1)
    test_patch: str = Field(min_length=1)  # the hidden tests: applied only by the check
    patch: str = ""  # SWE-bench's gold fix, when the suite has one: for checking the suite, never shown
    fail_to_pass: list[str] = Field(alias="FAIL_TO_PASS", min_length=1)
    pass_to_pass: list[str] = Field(default_factory=list, alias="PASS_TO_PASS")
    repo_path: str | None = None  # the git directory on the worker's machine (a clone URL works too)
    test_command: str = DEFAULT_TEST_COMMAND  # run with the test ids appended; pytest's -rA summary is read

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, value: str) -> str:
        if not INSTANCE_ID.match(value):
            raise ValueError("instance_id: letters, digits, '.', '_' and '-' only (it names workflows and files)")
        return value

    @field_validator("fail_to_pass", "pass_to_pass", mode="before")
    @classmethod
    def _test_ids(cls, value: Any) -> Any:
        if isinstance(value, str):  # SWE-bench stores the lists JSON-encoded
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list of test ids: {exc.msg}") from None
        return value


class TaskRef(BaseModel):
    """A task as an eval run's input carries it: its id, and the task itself in the blob store
    (the hidden tests never go through workflow history)."""

    instance_id: str
    digest: str
