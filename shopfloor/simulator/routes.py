"""Every REST router of the simulator, mounted under /api/v3 by create_app."""

from __future__ import annotations

from fastapi import APIRouter


def api_routers() -> list[APIRouter]:
    from shopfloor.simulator import (
        routes_app,
        routes_checks,
        routes_git,
        routes_hooks,
        routes_issues,
        routes_labels,  # fmt: skip
        routes_pulls,
        routes_repos,
        routes_reviews,
        routes_search,
    )

    # routes_checks first: its /commits/{ref}/status must win over routes_repos' /commits/{ref:path}.
    return [m.router for m in (routes_checks, routes_repos, routes_git, routes_issues, routes_labels, routes_pulls,
                               routes_reviews, routes_hooks, routes_app, routes_search)]  # fmt: skip
