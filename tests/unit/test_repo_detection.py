"""The repository profile's pure rules: which test command a repository's files call for, and which
setup plan (agents/test_commands.py, agents/setup_plans.py)."""

from __future__ import annotations

import pytest

from shopfloor.agents.setup_plans import detect_setup
from shopfloor.agents.test_commands import PYTEST, detect_test_command

pytestmark = pytest.mark.fast

NODE_TEST = '{"name": "x", "scripts": {"test": "node --test"}}'


@pytest.mark.parametrize(
    ("files", "command", "reason"),
    [
        ({"pytest.ini": ""}, PYTEST, "pytest.ini"),
        ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, PYTEST, "pyproject.toml has [tool.pytest.ini_options]"),
        ({"setup.cfg": "[tool:pytest]\n"}, PYTEST, "setup.cfg has [tool:pytest]"),
        ({"tox.ini": "[pytest]\naddopts=-q\n"}, PYTEST, "tox.ini has [pytest]"),
        # pytest configured wins over tox: the prepared environment runs it without the network.
        ({"tox.ini": "[tox]\nenvlist=py311\n[pytest]\n"}, PYTEST, "tox.ini has [pytest]"),
        (
            {"tox.ini": "[tox]\nenvlist = py311\n\n[testenv]\ncommands = pytest\n"},
            "tox",
            "tox.ini defines tox environments",
        ),
        ({"tox.ini": "[testenv:lint]\ncommands = ruff\n"}, "tox", "tox.ini defines tox environments"),
        ({"noxfile.py": "import nox\n", "tests/test_a.py": ""}, "nox", "noxfile.py"),
        ({"package.json": NODE_TEST}, "npm test --silent", "package.json scripts.test (no lock file)"),
        (
            {"package.json": NODE_TEST, "package-lock.json": "{}"},
            "npm test --silent",
            "package.json scripts.test (package-lock.json)",
        ),
        ({"package.json": NODE_TEST, "pnpm-lock.yaml": ""}, "pnpm test", "package.json scripts.test (pnpm-lock.yaml)"),
        ({"package.json": NODE_TEST, "yarn.lock": ""}, "yarn test", "package.json scripts.test (yarn.lock)"),
        ({"go.mod": "module x\n"}, "go test ./...", "go.mod"),
        ({"Cargo.toml": "[package]\n"}, "cargo test", "Cargo.toml"),
        ({"conftest.py": ""}, PYTEST, "Python tests (conftest.py)"),
        ({"tests/helpers.py": ""}, PYTEST, "Python tests (tests/helpers.py)"),
        ({"src/pkg/sub/test_mod.py": ""}, PYTEST, "Python tests (src/pkg/sub/test_mod.py)"),
        ({"Makefile": "build:\n\ttrue\ntest: build\n\ttrue\n"}, "make test", "Makefile has a test target"),
        ({"GNUmakefile": "test:\n\ttrue\n"}, "make test", "GNUmakefile has a test target"),
    ],
)
def test_each_rule_names_its_command_and_why(files, command, reason):
    found = detect_test_command(list(files), files)
    assert found is not None and (found.command, found.reason) == (command, reason)


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"README.md": "hi"},
        {"Makefile": "build:\n\ttrue\n"},
        # npm's placeholder, a script that is not a string, and a package.json that is not JSON
        {"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'},
        {"package.json": '{"scripts": {"test": 3}}'},
        {"package.json": "{not json"},
        {"package.json": "[]"},
        # test files too deep, or inside dependencies and hidden folders, do not count
        {"a/b/c/d/test_x.py": ""},
        {"node_modules/pkg/test_x.py": "", ".venv/lib/test_y.py": "", "vendor/tests/test_z.py": ""},
        {"pyproject.toml": "[project]\nname = 'x'\n"},
    ],
)
def test_nothing_matches_means_no_command(files):
    assert detect_test_command(list(files), files) is None


def test_the_order_between_toolchains():
    """A Node project with Python helper tests runs npm's tests; Go comes before a Makefile."""
    files = {"package.json": NODE_TEST, "tests/test_helper.py": "", "go.mod": "", "Makefile": "test:\n\ttrue\n"}
    assert detect_test_command(list(files), files).command == "npm test --silent"
    files = {"go.mod": "", "Makefile": "test:\n\ttrue\n"}
    assert detect_test_command(list(files), files).command == "go test ./..."


def test_a_listed_file_whose_text_was_not_read_is_judged_by_its_name_only():
    assert detect_test_command(["pyproject.toml", "tests/test_a.py"], {}).command == PYTEST


# --- setup plans ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "commands", "reason"),
    [
        ({"requirements.txt": ""}, ["python -m pip install -r requirements.txt"], "requirements.txt"),
        (
            {"requirements.txt": "", "requirements-dev.txt": "", "docs/requirements.txt": ""},
            ["python -m pip install -r requirements-dev.txt -r requirements.txt"],
            "requirements-dev.txt, requirements.txt",
        ),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, ["python -m pip install -e ."], "pyproject.toml [project]"),
        (
            {
                "pyproject.toml": "[project]\nname='x'\n[project.optional-dependencies]\ntest=['pytest']\ndev=['ruff']\ndocs=['x']\n"
            },
            ["python -m pip install -e '.[test,dev]'"],
            "pyproject.toml [project] with extras test, dev",
        ),
        ({"package.json": NODE_TEST, "package-lock.json": "{}"}, ["npm ci"], "package.json with package-lock.json"),
        (
            {"package.json": NODE_TEST, "pnpm-lock.yaml": ""},
            ["pnpm install --frozen-lockfile"],
            "package.json with pnpm-lock.yaml",
        ),
        (
            {"package.json": NODE_TEST, "yarn.lock": ""},
            ["yarn install --frozen-lockfile"],
            "package.json with yarn.lock",
        ),
        (
            {"requirements.txt": "", "package.json": "{}", "package-lock.json": "{}"},
            ["python -m pip install -r requirements.txt", "npm ci"],
            "requirements.txt; package.json with package-lock.json",
        ),
    ],
)
def test_a_detected_setup_plan_says_why(files, commands, reason):
    plan = detect_setup(list(files), files)
    assert (plan.commands, plan.source, plan.reason) == (commands, "detected", reason)


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"package.json": NODE_TEST},  # no lock file: an install would not be reproducible
        {"pyproject.toml": "[tool.ruff]\nline-length = 100\n"},  # no [project]
        {"pyproject.toml": "[project\nbroken"},
        {"setup.py": ""},
    ],
)
def test_no_plan_is_detected_without_a_known_manifest(files):
    plan = detect_setup(list(files), files)
    assert plan.commands == [] and plan.source == "none" and "no requirements" in plan.reason
