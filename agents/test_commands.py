"""Which command runs a repository's tests, judged from its list of files and the texts of a few of
them (pure: the caller reads the files, from a checkout or from git).

The first rule that matches decides, in this order (docs/policy.md, "Test command"):

1. pytest configured: `pytest.ini`, `[tool.pytest…]` in `pyproject.toml`, `[tool:pytest]` in
   `setup.cfg`, `[pytest]` in `tox.ini` → `python -m pytest -q` (the prepared environment's
   Python; tox and nox would build environments of their own, which needs the network);
2. `tox.ini` with `[tox]` or `[testenv…]` → `tox`;
3. `noxfile.py` → `nox`;
4. `package.json` whose `scripts.test` is a real one (not npm's "no test specified") → the lock
   file's tool: `pnpm test` (`pnpm-lock.yaml`), `yarn test` (`yarn.lock`), else `npm test --silent`;
5. `go.mod` → `go test ./...`;
6. `Cargo.toml` → `cargo test`;
7. Python tests without configuration: `conftest.py`, `test_*.py` / `*_test.py` within three
   folders of the root, or any `.py` under a top-level `tests/` or `test/` → `python -m pytest -q`;
8. a `test:` target in `Makefile` (`makefile`, `GNUmakefile`) → `make test`;

else none: the fix agent is told no test command was found, and `run_tests` says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

PYTEST = "python -m pytest -q"
# The files whose text the rules read (the rest is decided from the list of paths).
FILES_READ = (
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "package.json",
    "Makefile",
    "makefile",
    "GNUmakefile",
)
# Folders no rule looks into: dependencies, builds, other tools' environments.
SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "vendor", "target", "dist", "build"})
PYTHON_TEST_DEPTH = 3  # folders below the root a test_*.py may sit in and still count
NPM_PLACEHOLDER = 'echo "Error: no test specified"'  # what `npm init` writes for scripts.test


@dataclass(frozen=True)
class TestCommand:
    """A detected command and why (shown on the progress comment)."""

    __test__ = False  # not a pytest test class, whatever its name says

    command: str
    reason: str


def detect_test_command(paths: Collection[str], texts: Mapping[str, str]) -> TestCommand | None:
    """The repository's test command, from its file paths (relative, `/`-separated) and the texts
    of the FILES_READ it has; None when no rule matches."""
    files = set(paths)

    def text(name: str) -> str:
        return texts.get(name, "") if name in files else ""

    for name, marker, reason in (
        ("pytest.ini", "", "pytest.ini"),
        ("pyproject.toml", "[tool.pytest", "pyproject.toml has [tool.pytest.ini_options]"),
        ("setup.cfg", "[tool:pytest]", "setup.cfg has [tool:pytest]"),
        ("tox.ini", "[pytest]", "tox.ini has [pytest]"),
    ):
        if name in files and marker in text(name):
            return TestCommand(PYTEST, reason)
    if re.search(r"^\[(tox|testenv)[\]:]", text("tox.ini"), re.M):
        return TestCommand("tox", "tox.ini defines tox environments")
    if "noxfile.py" in files:
        return TestCommand("nox", "noxfile.py")
    script = npm_test_script(text("package.json"))
    if script is not None:
        tool, lock = node_tool(files)
        command = "npm test --silent" if tool == "npm" else f"{tool} test"
        return TestCommand(command, f"package.json scripts.test ({lock or 'no lock file'})")
    if "go.mod" in files:
        return TestCommand("go test ./...", "go.mod")
    if "Cargo.toml" in files:
        return TestCommand("cargo test", "Cargo.toml")
    found = python_tests(files)
    if found is not None:
        return TestCommand(PYTEST, f"Python tests ({found})")
    for name in ("Makefile", "makefile", "GNUmakefile"):
        if re.search(r"^test\s*:", text(name), re.M):
            return TestCommand("make test", f"{name} has a test target")
    return None


def npm_test_script(package_json: str) -> str | None:
    """package.json's `scripts.test` when it is one that runs tests (None: none, npm's
    placeholder, or not a JSON object)."""
    try:
        data = json.loads(package_json) if package_json.strip() else None
    except ValueError:
        return None
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(test, str) or not test.strip() or test.strip().startswith(NPM_PLACEHOLDER):
        return None
    return test


def node_tool(files: Collection[str]) -> tuple[str, str | None]:
    """(the package manager a Node project uses, the root lock file that says so)."""
    for lock, tool in (
        ("pnpm-lock.yaml", "pnpm"),
        ("yarn.lock", "yarn"),
        ("package-lock.json", "npm"),
        ("npm-shrinkwrap.json", "npm"),
    ):
        if lock in files:
            return tool, lock
    return "npm", None


def python_tests(files: Collection[str]) -> str | None:
    """The first file (sorted) that shows the repository has Python tests pytest would find."""
    for path in sorted(files):
        parts = PurePosixPath(path).parts
        if not parts or any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]):
            continue
        name = parts[-1]
        if name == "conftest.py" and len(parts) == 1:
            return path
        if parts[0] in ("tests", "test") and len(parts) > 1 and name.endswith(".py"):
            return path
        if len(parts) <= PYTHON_TEST_DEPTH + 1 and re.fullmatch(r"test_.*\.py|.*_test\.py", name):
            return path
    return None
