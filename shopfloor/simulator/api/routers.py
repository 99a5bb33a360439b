"""Every REST router of the simulator, mounted under /api/v3 by create_app."""

from __future__ import annotations

from fastapi import APIRouter


def api_routers() -> list[APIRouter]:
    from shopfloor.simulator.api import app, checks, git_refs, hooks, issues, labels, pulls, repos, reviews, search

    # checks first: its /commits/{ref}/status must win over repos' /commits/{ref:path}.
    return [m.router for m in (checks, repos, git_refs, issues, labels, pulls, reviews, hooks, app, search)]
