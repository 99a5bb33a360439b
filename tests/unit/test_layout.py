"""One import root (docs/design.md, Layout and import rules). The four folders are installed only as
shopfloor.*, every package is in pyproject's explicit list, and every __init__.py holds a docstring
only."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cli_runs import cli_env

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {  # folder in the repo -> the name it is installed under
    "shopfloor": "shopfloor",
    "workflows": "shopfloor.workflows",
    "activities": "shopfloor.activities",
    "agents": "shopfloor.agents",
    "webhooks": "shopfloor.webhooks",
}


# Package data that holds Python files without being part of shopfloor: the demo's sample
# repository is copied into a simulator repository, never imported.
DATA_DIRS = (ROOT / "shopfloor" / "demo" / "sample_repo", ROOT / "shopfloor" / "evals" / "builtin")


def _is_data(path: Path) -> bool:
    return any(path.is_relative_to(d) for d in DATA_DIRS)


def _packages() -> dict[str, Path]:
    """Every folder with an __init__.py under the five roots, by its installed dotted name."""
    found: dict[str, Path] = {}
    for folder, dotted in FOLDERS.items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            if "__pycache__" in init.parts or _is_data(init):
                continue
            rel = init.parent.relative_to(base).parts
            found[".".join((dotted, *rel))] = init
    return found


PACKAGES = _packages()


def _probe(tmp_path: Path, code: str) -> dict:
    """Run code in the installed interpreter from an empty directory: the repo root is not on
    sys.path, as for any installed console script."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


IMPORT_PROBE = """
import importlib, json, sys, traceback
assert not any(p and ("{root}" == p.rstrip("/")) for p in sys.path), sys.path
results = {{}}
for name in {names!r}:
    try:
        importlib.import_module(name)
        results[name] = "ok"
    except BaseException as exc:
        results[name] = type(exc).__name__ + ": " + str(exc).splitlines()[0] if str(exc) else type(exc).__name__
print(json.dumps(results))
"""


@pytest.mark.fast
def test_the_layout_finds_the_packages():
    # A guard for the walk below: an empty or partial list would make the other tests vacuous.
    for name in (
        "shopfloor",
        "shopfloor.cli",
        "shopfloor.workflows",
        "shopfloor.activities",
        "shopfloor.activities.providers",
        "shopfloor.agents",
        "shopfloor.webhooks",
    ):
        assert name in PACKAGES


@pytest.mark.parametrize("name", ["workflows", "agents", "activities", "webhooks"])
def test_top_level_folder_names_are_not_importable(tmp_path, name):
    result = _probe(tmp_path, IMPORT_PROBE.format(root=ROOT, names=[name]))
    assert result[name].startswith("ModuleNotFoundError"), f"`import {name}` gave {result[name]}"


def test_shopfloor_names_import(tmp_path):
    names = ["shopfloor.workflows", "shopfloor.agents", "shopfloor.activities", "shopfloor.webhooks"]
    result = _probe(tmp_path, IMPORT_PROBE.format(root=ROOT, names=names))
    assert result == dict.fromkeys(names, "ok")


def test_every_package_folder_is_importable_by_its_shopfloor_name(tmp_path):
    names = sorted(PACKAGES)
    result = _probe(tmp_path, IMPORT_PROBE.format(root=ROOT, names=names))
    assert {n: r for n, r in result.items() if r != "ok"} == {}


@pytest.mark.fast
def test_every_package_folder_is_in_pyprojects_package_list():
    """The editable install finds any subfolder, so importing alone cannot catch a package left
    out of the explicit list; a wheel built from it would silently lack that package."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    package_dir = tool["package-dir"]
    assert {dotted: package_dir.get(dotted) for dotted in FOLDERS.values()} == {
        dotted: folder for folder, dotted in FOLDERS.items()
    }, "package-dir must map each folder to its shopfloor.* name"
    missing = sorted(set(PACKAGES) - listed)
    assert missing == [], f"packages with an __init__.py missing from [tool.setuptools] packages: {missing}"
    stale = sorted(listed - set(PACKAGES))
    assert stale == [], f"[tool.setuptools] packages lists folders with no __init__.py: {stale}"


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_init_holds_only_a_docstring(name):
    init = PACKAGES[name]
    tree = ast.parse(init.read_text(), filename=str(init))
    assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} has no docstring"
    extra = [type(node).__name__ + f" (line {node.lineno})" for node in tree.body[1:]]
    assert extra == [], f"{init.relative_to(ROOT)} holds more than a docstring: {extra}"


# Imports flow one way (docs/design.md, Layout and import rules). Each layer, and the layers it must
# never import (a prefix matches the module and everything under it).
FORBIDDEN = {
    "shopfloor.models": ("shopfloor.agents", "shopfloor.activities", "shopfloor.workflows", "shopfloor.webhooks"),
    "shopfloor.agents": ("shopfloor.activities", "shopfloor.workflows", "shopfloor.webhooks", "temporalio.activity"),
    "shopfloor.activities": ("shopfloor.workflows", "shopfloor.webhooks"),
    "shopfloor.workflows": ("shopfloor.activities", "shopfloor.webhooks"),
}


def _module_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for folder, dotted in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts or _is_data(path):
                continue
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            files[".".join((dotted, *rel)).removesuffix(".__init__")] = path
    return files


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.fast
def test_imports_flow_one_way():
    wrong = []
    for module, path in _module_files().items():
        for layer, banned in FORBIDDEN.items():
            if module == layer or module.startswith(layer + "."):
                wrong += [
                    f"{module} imports {name}"
                    for name in sorted(_imports(path))
                    if any(name == b or name.startswith(b + ".") for b in banned)
                ]
    assert wrong == []


@pytest.mark.fast
def test_the_import_rule_sees_a_violation(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("from shopfloor.workflows.issue import IssueWorkflow\nimport shopfloor.webhooks.app\n")
    assert {"shopfloor.workflows.issue", "shopfloor.webhooks.app"} <= _imports(bad)
