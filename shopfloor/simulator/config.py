"""The simulator's settings, injected into `create_app` (nothing reads the environment here)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

# The personal token the App's bot holds on the simulator, and what shopfloor presents there when
# no GitHub credentials are configured (`shopfloor dev`, `shopfloor simulator`).
SIMULATOR_BOT_TOKEN = "shopfloor-simulator-bot"

# What shopfloor's GitHub App asks for (the README's permission table); `workflows` is not among
# them, so a push that changes `.github/workflows/` is refused as on GitHub.
SHOPFLOOR_APP_PERMISSIONS: dict[str, Literal["read", "write"]] = {
    "actions": "read",
    "checks": "read",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
    "statuses": "read",
}


class SimulatorConfig(BaseModel):
    # Every URL in a response is built from this (PyGithub refuses to follow foreign hosts).
    base_url: str = "http://127.0.0.1:8100"
    data_dir: Path
    # When set, every repository created gets a hook to this URL: how `shopfloor dev` wires
    # the simulator to shopfloor's own webhook server.
    default_hook_url: str | None = None
    default_hook_secret: SecretStr | None = None
    rate_limit: int = Field(default=5000, ge=1)
    search_rate_limit: int = Field(default=30, ge=1)
    # Search is eventually consistent: an issue is found by what it says this long after it changed.
    search_index_delay_s: float = Field(default=2.0, ge=0, le=600)
    # GitHub's secondary limit: at most this many content-creating requests (POST, PATCH, PUT,
    # DELETE) per token per minute; more get 403 with `retry-after` this many seconds.
    secondary_writes_per_minute: int = Field(default=80, ge=1)
    secondary_retry_after_s: int = Field(default=60, ge=1)
    installation_token_ttl_s: int = Field(default=3600, ge=1)
    app_id: int = 1
    # Tokens that act as the App's bot besides the installation tokens it mints; any other token
    # is a 401 "Bad credentials", as on GitHub.
    bot_tokens: list[SecretStr] = Field(default_factory=lambda: [SecretStr(SIMULATOR_BOT_TOKEN)])
    # The App's repository permissions: its installation tokens carry them and its bot's pushes
    # are held to them (`workflows`).
    app_permissions: dict[str, Literal["read", "write"]] = Field(
        default_factory=lambda: dict(SHOPFLOOR_APP_PERMISSIONS)
    )
    # PEM public keys by app id: JWTs from these apps are verified; others only need a future exp.
    app_public_keys: dict[int, str] = Field(default_factory=dict)
    # GitHub moves a pull request's head (and sends `synchronize`, and starts CI) in the background
    # after a push to its branch; this long after, here. 0: before the push is answered.
    pr_sync_delay_s: float = Field(default=0, ge=0, le=60)
    ci_timeout_s: float = Field(default=600, gt=0)
    delivery_timeout_s: float = Field(default=10, gt=0)

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @property
    def api_url(self) -> str:
        return self.base_url + "/api/v3"

    def is_bot_token(self, token: str) -> bool:
        return any(secrets.compare_digest(token, known.get_secret_value()) for known in self.bot_tokens)

    def app_may(self, permission: str, access: Literal["read", "write"] = "write") -> bool:
        granted = self.app_permissions.get(permission)
        return granted == "write" or (granted == "read" and access == "read")
