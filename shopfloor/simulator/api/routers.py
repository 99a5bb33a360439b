"""Every REST router of the simulator, mounted under /api/v3 by create_app."""

from __future__ import annotations

from fastapi import APIRouter


def api_routers() -> list[APIRouter]:
    from shopfloor.simulator.api import (
        app,
        branch_protection,
        checks,
        git_refs,
        hooks,
        issues,
        labels,
        pulls,
        repos,
        reviews,
        search,
    )

    # checks first: its /commits/{ref}/status must win over repos' /commits/{ref:path}; and
    # branch_protection's /branches/{b}/protection over repos' /branches/{branch:path}.
    first = (checks, branch_protection)
    return [m.router for m in (*first, repos, git_refs, issues, labels, pulls, reviews, hooks, app, search)]
