"""This very Python as a child process, importing the installed shopfloor whatever its working directory.

`python -c ...` and `python -m ...` put the working directory first on `sys.path`, so a child
started inside a checkout of shopfloor's source (or inside a repository that holds a `shopfloor/`
folder) would import that folder instead of the installed package. Every child process shopfloor
starts on its own Python goes through `python_command`.
"""

from __future__ import annotations

import sys


def python_command(*args: str, isolated: bool = False) -> list[str]:
    """`sys.executable` with `args`, never importing from the working directory: `-P` keeps it (and
    a script's directory) off `sys.path`. `isolated` (`-I`, which implies `-P`) also ignores the
    PYTHON* variables and the user's site-packages: for processes that start a repository's
    commands, whose environment and directories are not the worker's to trust."""
    return [sys.executable, "-I" if isolated else "-P", *args]
