"""Type-check the packages with mypy under the names they are imported by.

pyproject.toml installs `agents/` as `shopfloor.agents` (and likewise workflows, activities,
webhooks) through setuptools' `package-dir`, which an editable install serves with an import
hook. mypy finds modules from folders only, so plain `mypy agents` would check `agents.policy`
and fail every `import shopfloor.agents...`. This runner takes mypy's own source list (the
`files` in `[tool.mypy]`, or the paths given), renames each module by the same `package-dir`
table, and runs mypy's build on it: errors point at the real files (`agents/policy.py:12`) and
every import between our packages resolves.

Run from anywhere: `.venv/bin/python .ci/typecheck.py [mypy options]`. Exits like mypy: 0 clean,
1 type errors, 2 a blocking error.
"""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path

# mypy's internals (process_options, run_build) are not a public API; the pin in pyproject.toml
# keeps them to one minor version, and a change shows up here as an import or call error.
from mypy import util
from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent


def installed_names(pyproject: Path) -> dict[str, str]:
    """Top-level folder -> the package it is installed as, from `[tool.setuptools] package-dir`."""
    package_dir = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in package_dir.items() if package != folder}


def renamed(module: str, names: dict[str, str]) -> str:
    top, dot, rest = module.partition(".")
    return names[top] + dot + rest if top in names else module


def main(argv: list[str]) -> int:
    started = time.time()
    os.chdir(ROOT)  # the config's `files` and `exclude` are relative to the repository
    names = installed_names(ROOT / "pyproject.toml")
    fscache = FileSystemCache()
    sources, options = process_options(argv, fscache=fscache)
    sources = [BuildSource(s.path, renamed(s.module, names), s.text, s.base_dir, s.followed) for s in sources]
    _, messages, blockers = run_build(sources, options, fscache, started, sys.stdout, sys.stderr)
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    n_errors, n_notes, n_files = util.count_stats(messages)
    if n_errors:
        print(
            formatter.format_error(n_errors, n_files, len(sources), blockers=blockers, use_color=options.color_output)
        )
    else:
        print(formatter.format_success(len(sources), options.color_output))
    if blockers:
        return 2
    return 1 if n_errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
