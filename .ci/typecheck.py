"""Type-check the packages with mypy under the names they are imported by.

pyproject.toml installs `agents/` as `shopfloor.agents` (and likewise workflows, activities,
webhooks) through setuptools' `package-dir`, which an editable install serves with an import
hook that no static tool follows: plain `mypy agents` would check a module `agents.policy` and
fail every `import shopfloor.agents...`. So this builds the installed layout as a tree of
symbolic links (.mypy_cache/tree/shopfloor/ holds the kernel's entries and the four folders,
named by `package-dir`), runs mypy there with the settings of `[tool.mypy]`, and prints its
report with the repository's own paths (`agents/policy.py:12`, not `shopfloor/agents/...`).

`.venv/bin/python .ci/typecheck.py [mypy options] [paths]`, from anywhere; without paths it
checks the whole `shopfloor` package. Exits as mypy does: 0 clean, 1 type errors, 2 a crash or
bad usage.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".mypy_cache"  # mypy writes a .gitignore here; the tree lives beside its cache
TREE = CACHE / "tree"
KERNEL = "shopfloor"


def folders_by_package() -> dict[str, str]:
    """`shopfloor.agents` -> `agents`, ...: the folders installed under another name."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {package: folder for package, folder in package_dir.items() if package != folder}


def build_tree(folders: dict[str, str]) -> None:
    """TREE/shopfloor: a link to each entry of shopfloor/, and to each folder under its name."""
    shutil.rmtree(TREE, ignore_errors=True)  # links only: the targets are not followed
    package = TREE / KERNEL
    package.mkdir(parents=True)
    for entry in (ROOT / KERNEL).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in folders.items():
        parent, _, child = name.rpartition(".")
        if parent != KERNEL:
            raise SystemExit(f"package-dir maps {name!r}; this runner only knows subpackages of {KERNEL}")
        (package / child).symlink_to(ROOT / folder)


def tree_path(arg: str, folders: dict[str, str]) -> str:
    """A repository path given on the command line, as the tree shows it (options pass as is)."""
    path = Path(arg).resolve()
    if arg.startswith("-") or not path.exists() or not path.is_relative_to(ROOT):
        return arg
    rel = path.relative_to(ROOT).as_posix()
    for name, folder in folders.items():
        if rel == folder or rel.startswith(folder + "/"):
            return name.replace(".", "/") + rel[len(folder) :]
    return rel


def repository_paths(report: str, folders: dict[str, str]) -> str:
    """mypy's report with each tree path turned back into the file's path in the repository."""
    for name, folder in folders.items():
        report = re.sub(rf"(?m)^{re.escape(name.replace('.', '/'))}/", f"{folder}/", report)
    return report


def main(argv: list[str]) -> int:
    folders = folders_by_package()
    targets = [tree_path(arg, folders) for arg in argv]
    if not any(Path(arg).exists() for arg in argv if not arg.startswith("-")):
        targets.append(KERNEL)
    build_tree(folders)
    os.chdir(TREE)  # the tree is the only source root: every import resolves inside it
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(CACHE)]
    stdout, stderr, status = api.run([*config, *targets])
    sys.stdout.write(repository_paths(stdout, folders))
    sys.stderr.write(repository_paths(stderr, folders))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
