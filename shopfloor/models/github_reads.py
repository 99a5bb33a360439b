"""Inputs and outputs of the GitHub reads that feed triage and the policy gate: the repository
policy on the default branch and issues similar to the one being triaged.

They travel through workflow history: short fields only. New fields always get defaults.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from shopfloor.models.github_ops import RepoName

POLICY_FILE = ".github/shopfloor.yml"


class PolicyInput(BaseModel):
    repo: RepoName
    path: str = POLICY_FILE  # always read at the default branch, never at a PR head


class SimilarIssuesInput(BaseModel):
    repo: RepoName
    number: int = Field(ge=1)  # the issue itself, left out of the results
    title: str
    limit: int = Field(default=5, ge=1, le=20)


class SimilarIssue(BaseModel):
    number: int
    title: str  # as GitHub has it: untrusted, capped at 256 characters
    state: str
    url: str = ""


class SimilarIssuesOutput(BaseModel):
    issues: list[SimilarIssue] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)  # what was searched for (empty: nothing to search)
