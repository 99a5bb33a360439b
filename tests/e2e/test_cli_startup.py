"""`shopfloor --help` imports no command's module (nor Temporal, FastAPI or the simulator): what
made every CLI call take seconds to start. The time itself is in the note, not a timed test."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from typer.testing import CliRunner
from shopfloor.cli.main import app
result = CliRunner().invoke(app, ARGS)
assert result.exit_code == 0, result.output
print("\\n".join(sorted(m for m in sys.modules if m.startswith(("shopfloor", "temporalio", "fastapi", "github")))))
"""


def _loaded(args: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("ARGS", repr(args))], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_help_loads_only_the_command_table():
    assert _loaded(["--help"]) == {"shopfloor", "shopfloor.cli", "shopfloor.cli.lazy", "shopfloor.cli.main"}


def test_a_commands_help_loads_that_command_alone():
    loaded = _loaded(["replay", "--help"])
    assert "shopfloor.cli.replay" in loaded
    assert not loaded & {"shopfloor.cli.demo", "shopfloor.cli.dev", "shopfloor.cli.simulator", "shopfloor.cli.agent"}
