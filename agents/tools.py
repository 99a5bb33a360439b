"""The tools agents may call: their arguments (pydantic models) and what the model is told.

The code behind each tool lives in shopfloor.activities.tools; this module is pure data.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shopfloor.models.transcript import Risk, ToolSpec


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFileArgs(_Args):
    path: str = Field(description="File path relative to the repository root.")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based).")
    limit: int = Field(default=400, ge=1, le=5000, description="How many lines to read at most.")


class ListDirArgs(_Args):
    path: str = Field(default=".", description="Directory relative to the repository root.")


class GlobArgs(_Args):
    pattern: str = Field(description="Glob pattern relative to the root, e.g. 'src/**/*.py'.")
    path: str = Field(default=".", description="Directory to search from.")


class GrepArgs(_Args):
    pattern: str = Field(
        description=(
            "Regular expression to search for, in ripgrep's (Rust) syntax: like Python's re, but without "
            "look-around ((?=...), (?<=...)) or backreferences (\\1); it matches within one line."
        )
    )
    path: str = Field(default=".", description="File or directory to search in.")
    glob: str | None = Field(default=None, description="Only search files matching this glob, e.g. '*.py'.")
    ignore_case: bool = False
    max_matches: int = Field(default=200, ge=1, le=2000)


class EditFileArgs(_Args):
    path: str = Field(description="File to edit, relative to the repository root.")
    old: str = Field(description="Exact text to replace; must occur exactly once in the file.")
    new: str = Field(description="Replacement text.")


class WriteFileArgs(_Args):
    path: str = Field(description="File to create or overwrite, relative to the repository root.")
    content: str = Field(description="The whole new content of the file.")


class GitDiffArgs(_Args):
    path: str | None = Field(default=None, description="Only this file or directory (default: everything).")


class RunCommandArgs(_Args):
    command: str = Field(description="Shell command, run with bash in the repository root, in a sandbox.")
    timeout_s: float | None = Field(default=None, gt=0, le=3600, description="Seconds before it is stopped.")


class RunTestsArgs(_Args):
    args: str = Field(default="", description="Extra arguments for the repository's test command.")


class ReadOutputArgs(_Args):
    digest: str = Field(description="Digest of a full tool output, as given in a truncation note.")
    offset: int = Field(default=0, ge=0, description="First character to return.")
    limit: int = Field(default=12_000, ge=1, le=50_000, description="How many characters to return.")


class DelegateArgs(_Args):
    question: str = Field(
        min_length=1,
        max_length=4000,
        description=(
            "A bounded question about the repository for a read-only subagent, with what it needs to know "
            "(paths, names): it sees the repository as it is now, not this conversation."
        ),
    )
    max_steps: int | None = Field(default=None, ge=1, le=30, description="Steps the subagent may take (default 15).")


class RunPythonArgs(_Args):
    code: str = Field(
        min_length=1,
        max_length=20_000,
        description=(
            "A short Python 3 program. It may call read_file(path, offset=1, limit=400), list_dir(path='.'), "
            "glob(pattern, path='.') and grep(pattern, path='.', glob=None, ignore_case=False, max_matches=200), "
            "which return the same text as those tools (a refused call raises BindingError with the reason). "
            "What it prints is the result. It sees no files or network of its own: only these functions."
        ),
    )


class ToolDef(BaseModel):
    name: str
    description: str
    args: type[_Args]
    risk: Risk = "read"

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.args.model_json_schema(),
            risk=self.risk,
        )


TOOLS: dict[str, ToolDef] = {
    t.name: t
    for t in [
        ToolDef(
            name="read_file",
            description="Read a text file of the repository, with line numbers. Page with offset/limit.",
            args=ReadFileArgs,
        ),
        ToolDef(
            name="list_dir",
            description="List a directory of the repository: one entry a line, directories end with '/'.",
            args=ListDirArgs,
        ),
        ToolDef(
            name="glob",
            description="Find files whose path matches a glob pattern ('**' spans directories).",
            args=GlobArgs,
        ),
        ToolDef(
            name="grep",
            description=(
                "Search file contents with a regular expression (ripgrep's syntax: no look-around or "
                "backreferences; matches within one line); prints path:line: text."
            ),
            args=GrepArgs,
        ),
        ToolDef(
            name="git_diff",
            description="Show what you changed so far (a unified diff against the starting commit).",
            args=GitDiffArgs,
        ),
        ToolDef(
            name="read_output",
            description="Page through a full tool output that was cut for length, by its digest.",
            args=ReadOutputArgs,
        ),
        ToolDef(
            name="edit_file",
            description="Replace one exact, unique occurrence of `old` with `new` in a file.",
            args=EditFileArgs,
            risk="write",
        ),
        ToolDef(
            name="write_file",
            description="Create a file or replace its whole content.",
            args=WriteFileArgs,
            risk="write",
        ),
        ToolDef(
            name="run_command",
            description="Run a shell command in the repository (sandboxed; no network unless the policy allows).",
            args=RunCommandArgs,
            risk="exec",
        ),
        ToolDef(
            name="run_tests",
            description="Run the repository's tests and show the result.",
            args=RunTestsArgs,
            risk="exec",
        ),
        ToolDef(
            name="run_python",
            description=(
                "Run a short Python program that calls the read-only tools as functions, to do in one step "
                "what would take many calls (search, read, filter, count); you get what it prints."
            ),
            args=RunPythonArgs,
        ),
        ToolDef(
            name="delegate",
            description=(
                "Ask a read-only subagent (explore) a question about the repository; it works with its own "
                "budget and you get back only its answer, so your context stays small. Several delegate "
                "calls in one reply run at the same time."
            ),
            args=DelegateArgs,
        ),
    ]
}

READ_ONLY_TOOLS = ("read_file", "list_dir", "glob", "grep", "read_output")
# The read-only tools a run_python program may call (activities/code_mode.py), by the same judge.
PYTHON_BINDINGS = ("read_file", "list_dir", "glob", "grep")
RUN_PYTHON = "run_python"
# Runs a subagent as a child workflow (workflows/subagents.py), not a tool activity. The explore
# agent, which subagents are, does not have it.
DELEGATE = "delegate"
