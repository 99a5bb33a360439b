"""How a repository's workspace is prepared when its policy has no `setup:`: the plan detected from
its root files, with the reason shown on the progress comment (pure: the caller reads the files).

Each part that matches adds its commands, in this order (docs/policy.md, "Setup"):

- `requirements*.txt` at the root → `python -m pip install -r <each>` (sorted, one command);
- `pyproject.toml` with a `[project]` table → `python -m pip install -e .`, with the `test` and
  `dev` extras it declares (`-e '.[test,dev]'`);
- `package.json` with a lock file → `pnpm install --frozen-lockfile` (`pnpm-lock.yaml`),
  `yarn install --frozen-lockfile` (`yarn.lock`) or `npm ci` (`package-lock.json`,
  `npm-shrinkwrap.json`); without a lock file nothing is installed (an install would not be
  reproducible);

nothing matched: no setup.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Collection, Mapping

from shopfloor.agents.test_commands import node_tool
from shopfloor.models.repo_profile import SetupPlan

FILES_READ = ("pyproject.toml",)
EXTRAS = ("test", "tests", "testing", "dev")  # optional-dependencies the agents' tests may need
MAX_REQUIREMENTS = 10  # root requirements files installed at most


def detect_setup(paths: Collection[str], texts: Mapping[str, str]) -> SetupPlan:
    """The detected plan (source "detected"), or an empty one (source "none") saying why."""
    files = set(paths)
    commands: list[str] = []
    reasons: list[str] = []
    requirements = sorted(p for p in files if re.fullmatch(r"requirements[\w.-]*\.txt", p))[:MAX_REQUIREMENTS]
    if requirements:
        commands.append("python -m pip install " + " ".join(f"-r {shlex.quote(r)}" for r in requirements))
        reasons.append(", ".join(requirements))
    extras = project_extras(texts.get("pyproject.toml", "")) if "pyproject.toml" in files else None
    if extras is not None:
        target = f".[{','.join(extras)}]" if extras else "."
        commands.append(f"python -m pip install -e {shlex.quote(target)}")
        reasons.append("pyproject.toml [project]" + (f" with extras {', '.join(extras)}" if extras else ""))
    if "package.json" in files:
        tool, lock = node_tool(files)
        if lock is not None:
            commands.append("npm ci" if tool == "npm" else f"{tool} install --frozen-lockfile")
            reasons.append(f"package.json with {lock}")
    if not commands:
        return SetupPlan(
            source="none", reason="no requirements*.txt, pyproject.toml [project] or package.json lock file"
        )
    return SetupPlan(commands=commands, source="detected", reason="; ".join(reasons))


def project_extras(pyproject: str) -> list[str] | None:
    """The test/dev extras a pyproject.toml's `[project]` declares ([] for none); None when it has
    no `[project]` table (or is not valid TOML: nothing to install from it)."""
    try:
        data = tomllib.loads(pyproject)
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    project = data.get("project")
    if not isinstance(project, dict):
        return None
    optional = project.get("optional-dependencies")
    declared = optional if isinstance(optional, dict) else {}
    return [e for e in EXTRAS if e in declared]
