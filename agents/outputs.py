"""The structured results agents submit (the `submit` tool's arguments), by name.

Every string and list is bounded: a result travels through workflow history (AgentResult.output),
so a submission must stay small — MAX_OUTPUT_BYTES of JSON at most, checked on submit too.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# The alert assessment is also part of AlertWorkflow's state (models/alert_issue.py), so it is
# defined with the models; it is registered here like every agent result.
from shopfloor.models.alert_issue import AlertAssessment

MAX_OUTPUT_BYTES = 16_384

Label = Annotated[str, Field(min_length=1, max_length=50)]
Path = Annotated[str, Field(min_length=1, max_length=300)]


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is a validation error the model can fix


class TriageResult(_Output):
    kind: Literal["bug", "feature", "question", "docs", "duplicate", "invalid"]
    severity: Literal["low", "medium", "high", "critical"]
    labels: list[Label] = Field(default_factory=list, max_length=10, description="Labels to put on the issue.")
    duplicate_of: int | None = Field(default=None, ge=1, description="The issue this duplicates (kind=duplicate).")
    summary: str = Field(max_length=2000, description="What the issue is about, in your own words.")
    plan: str = Field(default="", max_length=4000, description="How to fix it: files, functions, approach.")
    fixability: float = Field(ge=0.0, le=1.0, description="How likely an automated fix succeeds (0..1).")
    fixability_reasons: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list, max_length=10)


class FixResult(_Output):
    pr_title: str = Field(min_length=1, max_length=120)
    pr_body: str = Field(max_length=6000, description="Pull request description; references the issue ('Fixes #N').")
    summary: str = Field(max_length=2000, description="What was changed and why.")
    tests_command: str = Field(default="", max_length=500, description="The command you ran the tests with.")
    # Filled by the harness from the last run of the required test command after the last edit;
    # whatever the model sends here is overwritten (the harness's record wins).
    tests_passed: bool | None = None
    remaining_work: str = Field(default="", max_length=2000, description="What is left to do, if anything.")


class ReviewComment(_Output):
    path: Path
    line: int = Field(ge=1)
    body: str = Field(min_length=1, max_length=1000)


class ReviewResult(_Output):
    verdict: Literal["approve", "request_changes", "comment"]
    summary: str = Field(max_length=4000)
    comments: list[ReviewComment] = Field(default_factory=list, max_length=25)


class MergeResult(_Output):
    commit_title: str = Field(min_length=1, max_length=120)
    commit_message: str = Field(default="", max_length=4000)
    conflicts: list[Path] = Field(default_factory=list, max_length=50, description="Paths still in conflict.")
    resolved: bool = Field(description="True when every conflict is resolved and the branch merges cleanly.")


OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m for m in (TriageResult, FixResult, ReviewResult, MergeResult, AlertAssessment)
}


def get_output_model(name: str) -> type[BaseModel]:
    try:
        return OUTPUT_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown output model {name!r}; known: {', '.join(sorted(OUTPUT_MODELS))}") from None
