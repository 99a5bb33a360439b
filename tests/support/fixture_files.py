"""The third-party test fixtures in tests/fixtures (provenance in its README.md and LICENSES.md).

A missing fixture is a failure, never a skip: a test that silently stops testing hides a gap.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
GITHUB_WEBHOOKS = ROOT / "github" / "webhooks"
ALERTS = ROOT / "alerts"


def fixture(*parts: str) -> Path:
    """The path of one fixture file, which must exist."""
    path = ROOT.joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"test fixture {path.relative_to(ROOT)} is missing from {ROOT}")
    return path


def webhook_names() -> list[str]:
    """Every recorded GitHub webhook body; the folder must not be empty."""
    names = sorted(p.name for p in GITHUB_WEBHOOKS.glob("*.json"))
    if not names:
        raise FileNotFoundError(f"no GitHub webhook fixtures in {GITHUB_WEBHOOKS}")
    return names
