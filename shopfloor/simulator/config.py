"""The simulator's settings, injected into `create_app` (nothing reads the environment here)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, field_validator


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
    installation_token_ttl_s: int = Field(default=3600, ge=1)
    app_id: int = 1
    # PEM public keys by app id: JWTs from these apps are verified; others only need a future exp.
    app_public_keys: dict[int, str] = Field(default_factory=dict)
    ci_timeout_s: float = Field(default=600, gt=0)
    delivery_timeout_s: float = Field(default=10, gt=0)

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @property
    def api_url(self) -> str:
        return self.base_url + "/api/v3"
