"""The agents shopfloor knows, by name."""

from __future__ import annotations

from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.tools import DELEGATE, READ_ONLY_TOOLS, RUN_PYTHON, TOOLS
from shopfloor.models.agent_run import Limits

AGENTS: dict[str, AgentDefinition] = {
    a.name: a
    for a in [
        AgentDefinition(
            name="explore",
            description="Answers questions about a repository using read-only tools.",
            prompt_file="explore.md",
            tools=list(READ_ONLY_TOOLS),
            limits=Limits(max_steps=40),
        ),
        AgentDefinition(
            name="code",
            description="Changes a repository: reads, edits, runs commands and tests in a sandbox.",
            prompt_file="code.md",
            tools=list(TOOLS),
            limits=Limits(max_steps=60),
        ),
        # The factory's agents: each finishes by submitting a structured result.
        AgentDefinition(
            name="triage",
            description="Classifies an issue, plans a fix and rates how fixable it is (read-only).",
            prompt_file="triage.md",
            tools=[*READ_ONLY_TOOLS, RUN_PYTHON, DELEGATE],
            limits=Limits(max_steps=30),
            output_model="TriageResult",
        ),
        AgentDefinition(
            name="fix",
            description="Fixes an issue with the smallest change, runs the tests and writes the PR text.",
            prompt_file="fix.md",
            tools=list(TOOLS),
            limits=Limits(max_steps=60),
            output_model="FixResult",
            submit_requires_command=True,
        ),
        AgentDefinition(
            name="review",
            description="Reviews a pull request against its issue and CI result; may run the tests.",
            prompt_file="review.md",
            tools=[*READ_ONLY_TOOLS, RUN_PYTHON, "run_command", "run_tests", DELEGATE],
            limits=Limits(max_steps=40),
            output_model="ReviewResult",
        ),
        AgentDefinition(
            name="merge",
            description="Resolves a pull request branch's conflicts with its base, or reports them.",
            prompt_file="merge.md",
            tools=list(TOOLS),
            limits=Limits(max_steps=30),
            output_model="MergeResult",
        ),
        # The AlertWorkflow's: is an alert worth an issue? Read-only, and cheap (few steps).
        AgentDefinition(
            name="assess_alert",
            description="Decides whether a monitoring alert points at a bug in the repository (read-only).",
            prompt_file="assess_alert.md",
            tools=list(READ_ONLY_TOOLS),
            limits=Limits(max_steps=20),
            output_model="AlertAssessment",
        ),
    ]
}


def get_agent(name: str) -> AgentDefinition:
    try:
        return AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; known agents: {', '.join(sorted(AGENTS))}") from None
