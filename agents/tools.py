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
    pattern: str = Field(description="Python regular expression to search for.")
    path: str = Field(default=".", description="File or directory to search in.")
    glob: str | None = Field(default=None, description="Only search files matching this glob, e.g. '*.py'.")
    ignore_case: bool = False
    max_matches: int = Field(default=200, ge=1, le=2000)


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
            description="Search file contents with a regular expression; prints path:line: text.",
            args=GrepArgs,
        ),
    ]
}

READ_ONLY_TOOLS = tuple(TOOLS)
