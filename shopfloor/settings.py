"""Settings from the environment (`SHOPFLOOR_*` plus the providers' own variables).

Read once, at an entrypoint (CLI command, worker, test), and passed down; nothing reads the
environment at import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shopfloor.models.mcp import McpServerSpec

DEFAULT_MODEL = "scripted:explore-demo"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SHOPFLOOR_", extra="ignore")

    # Temporal. With no address, `shopfloor dev` starts an embedded dev server on `temporal_port`
    # and everything else connects to it there.
    temporal_address: str | None = None
    temporal_namespace: str = "default"
    temporal_port: int = 7233
    temporal_ui_port: int = 8233
    # Where people reach the Temporal UI (links in progress comments and CLI output); unset: the
    # embedded dev server's http://localhost:<temporal_ui_port>.
    temporal_ui_url: str | None = None
    temporal_api_key: SecretStr | None = None  # Temporal Cloud and other API-key clusters
    temporal_tls: bool = False
    # mTLS: a client certificate and its private key (PEM files, both or neither), and the CA that
    # signed the server's certificate when it is not a public one. Any of them turns TLS on.
    temporal_tls_cert_file: Path | None = None
    temporal_tls_key_file: Path | None = Field(default=None, validate_default=True)
    temporal_tls_ca_file: Path | None = None
    task_queue: str = "shopfloor"
    # Workflows kept in a worker's cache. 0 forces a full replay of every task (tests use it).
    max_cached_workflows: int = Field(default=1000, ge=0)
    # How long a cached workflow's next task waits for the worker that cached it before any worker
    # may take it (replaying it): after that worker dies, its runs can stand still this long. The
    # SDK's default is 10 s; histories here are small, so a replay costs less than the wait.
    sticky_queue_timeout_seconds: float = Field(default=3.0, gt=0, le=300)
    # Activities one worker runs at once: model calls waiting on a provider (cheap) and tool calls,
    # each command a sandboxed process under the repository's limits (size memory for those).
    max_concurrent_activities: int = Field(default=200, ge=1)
    # A `shopfloor worker` told to stop (SIGTERM, Ctrl-C) takes no new tasks and gives running
    # activities this long to finish; the rest are cancelled and retried on another worker. Keep
    # it under the orchestrator's kill deadline. `shopfloor dev` and `demo` stop at once.
    worker_shutdown_grace_seconds: float = Field(default=60.0, ge=0, le=3600)
    # A worker's HTTP endpoint: GET /metrics (Prometheus), /healthz, /readyz; port 0: none. The
    # Temporal SDK's own metrics are on a port of their own (0: none). A port set here that is
    # taken stops the worker; a default one that is taken is skipped with a warning.
    worker_metrics_host: str = "127.0.0.1"
    worker_metrics_port: int = Field(default=9464, ge=0, le=65535)
    worker_sdk_metrics_port: int = Field(default=9465, ge=0, le=65535)

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".shopfloor")
    blob_url: str | None = None  # default: file store under <data_dir>/blobs; s3://bucket/prefix
    s3_endpoint_url: str | None = None  # for S3-compatible stores (MinIO, moto, R2 ...)
    # The largest change an agent's workspace checkpoint stores (its patch, in bytes): a tool call
    # that makes a bigger one is undone and the model is told which files are too large.
    max_checkpoint_bytes: int = Field(default=20 * 1024 * 1024, ge=64 * 1024)

    model: str = DEFAULT_MODEL
    # Per-agent models for the factory's agents, most specific first: "<agent>-<round>" (e.g.
    # "review-2"), then "<agent>", then `model`. JSON: {"triage": "openai:gpt-4.1-mini"}.
    agent_models: dict[str, str] = Field(default_factory=dict)
    # Models a repository's policy may choose for its agents (`models:` in .github/shopfloor.yml),
    # JSON list of "provider:model"; empty: repositories cannot choose (a `models:` key is an error).
    repo_models: list[str] = Field(default_factory=list)
    # Models that accept images (`provider:model` globs, JSON list); None: the known list in
    # agents/images.py. A model not matched gets a note in place of each image.
    image_models: list[str] | None = None
    # MCP servers agents may use (a repository's policy picks among them), by name: {"name": {"command": [...]}}.
    mcp_servers: dict[str, McpServerSpec] = Field(default_factory=dict)
    # Price overrides, USD per million tokens: {"my-model": [input, output]} (JSON in SHOPFLOOR_PRICES).
    prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    # An agent run on a model with no price cannot be held to a cost limit, so it must be held to
    # this many tokens (input + output) instead; None: such a run does not start (a repository's
    # `budgets.max_tokens` may set it lower, or set it when this is None).
    max_tokens_unpriced: int | None = Field(default=None, ge=1000)
    # The spend ledger (workflows/ledger.py): limits per repository and in total, per UTC day and
    # month; None: no limit. Pipelines wait (visibly) for one that is reached; `shopfloor budget
    # set` overrides them. `ledger`: count every run even when no limit is set.
    ledger: bool = False
    repo_runs_per_day: int | None = Field(default=None, ge=0)
    repo_runs_per_month: int | None = Field(default=None, ge=0)
    repo_cost_usd_per_day: float | None = Field(default=None, ge=0)
    repo_cost_usd_per_month: float | None = Field(default=None, ge=0)
    repo_max_running: int | None = Field(default=None, ge=1)  # pipelines of one repository at once
    total_runs_per_day: int | None = Field(default=None, ge=0)
    total_runs_per_month: int | None = Field(default=None, ge=0)
    total_cost_usd_per_day: float | None = Field(default=None, ge=0)
    total_cost_usd_per_month: float | None = Field(default=None, ge=0)
    total_max_running: int | None = Field(default=None, ge=1)
    # How long a model call may go without a heartbeat before Temporal retries it elsewhere: how
    # soon a crashed worker's in-flight call is noticed (factory agent runs).
    model_heartbeat_seconds: float = Field(default=30.0, ge=5, le=600)
    # The progress comment shows the running agent's steps, edited at most this often (GitHub's
    # secondary rate limits count edits as content creation); 0 turns the live checklist off.
    progress_edit_seconds: float = Field(default=5.0, ge=0, le=3600)
    sandbox: Literal["auto", "bwrap", "none"] = "auto"  # how agents' commands are contained
    # With `auto` and no usable bubblewrap, commands are refused unless the operator allows them
    # to run without a sandbox.
    allow_unsandboxed_commands: bool = False
    # Each command's own /tmp and /dev/shm, made here on disk (default: <data_dir>/scratch).
    sandbox_scratch_dir: Path | None = None
    # Where commands' cgroups go: "auto" (under the worker's own, v2 or v1), "off" (the watchdog
    # alone), or a delegated cgroup v2 directory.
    sandbox_cgroup: str = Field(default="auto", pattern=r"^(auto|off|/.+)$")
    # More host directories commands may read (toolchains outside /usr), JSON list.
    sandbox_readonly_paths: list[str] = Field(default_factory=list)
    # Host patterns a repository's `network_allow` may add to the package registries that commands
    # reach through the sandbox's egress proxy (JSON list: '["*.corp.example", "mirror.example.org:8443"]').
    sandbox_network_allow: list[str] = Field(default_factory=list)
    # The operator's internal package mirrors: exact "host:port" endpoints (may be private or
    # loopback) that commands with network, setup included, reach like the package registries
    # (JSON list: '["10.0.0.5:3141", "pypi.internal:8080"]'). Repositories cannot add one.
    sandbox_mirrors: list[str] = Field(default_factory=list)
    # The largest prepared environment (setup's, packed) a worker keeps in the blob store, in bytes.
    max_environment_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=1024 * 1024)

    webhook_host: str = "127.0.0.1"
    webhook_port: int = 8000
    webhook_secret: SecretStr | None = None  # GitHub webhooks' HMAC key (X-Hub-Signature-256)
    webhook_max_body_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)  # GitHub caps payloads at 25 MB
    # Off: issue workflows are event inboxes only (commands, snapshots) and run no agents.
    factory_pipeline: bool = True
    trigger_label: str = "shopfloor"  # an issue with this label is worked on (and reconciled)

    # The reconciler (a Temporal Schedule, `shopfloor setup` / `shopfloor dev` create it): every
    # few minutes it redelivers failed webhook deliveries and starts missing issue workflows.
    # `repos`: the repositories this factory serves (JSON list, SHOPFLOOR_REPOS='["acme/shop"]');
    # empty means no schedule.
    repos: list[str] = Field(default_factory=list)
    reconcile_every_minutes: int = Field(default=5, ge=1)

    # Alert sources: Alertmanager and generic JSON send `Authorization: Bearer <alert_token>`;
    # Sentry signs with its integration's client secret (Sentry-Hook-Signature).
    alert_token: SecretStr | None = None
    sentry_client_secret: SecretStr | None = None
    # Which repository an alert belongs to, first match wins (JSON):
    # {"service=checkout": "acme/shop", "job=api": "acme/api", "*": "acme/ops"}
    # Keys are `<label>=<value>` matched against the alert's labels (Sentry: its project slug is the
    # label `project`), or "*" as the fallback.
    alert_routes: dict[str, str] = Field(default_factory=dict)

    # GitHub. With neither a token nor an App configured, `shopfloor dev` starts the GitHub
    # simulator and points everything at it.
    github_api_url: str = "https://api.github.com"
    github_token: SecretStr | None = None
    github_app_id: int | None = None
    github_app_private_key: SecretStr | None = None  # PEM text; or a file, below
    github_app_private_key_file: Path | None = None
    github_bot_login: str = "shopfloor[bot]"  # our own events carry this sender; they are ignored

    # The GitHub simulator (`shopfloor simulator`, and inside `shopfloor dev` without credentials).
    simulator_host: str = "127.0.0.1"
    simulator_port: int = 8100

    log_level: str = "INFO"
    log_json: bool | None = None  # default: JSON unless stderr is a terminal

    # Provider credentials keep the providers' own variable names.
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL"))
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = Field(default=None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL"))

    @field_validator("temporal_tls_key_file")
    @classmethod
    def _client_cert_and_key_together(cls, key_file: Path | None, info: ValidationInfo) -> Path | None:
        # Checked here (no file is read) so the mistake is one line at start-up, not a TLS error.
        # Fields validate in order: the cert file is already in info.data (absent if it was invalid).
        cert_file = info.data.get("temporal_tls_cert_file")
        if (cert_file is None) != (key_file is None):
            given, missing = ("CERT", "KEY") if key_file is None else ("KEY", "CERT")
            raise ValueError(
                f"SHOPFLOOR_TEMPORAL_TLS_{given}_FILE is set but SHOPFLOOR_TEMPORAL_TLS_{missing}_FILE is not: "
                "an mTLS client certificate needs both"
            )
        return key_file

    @property
    def github_configured(self) -> bool:
        """Credentials for a real GitHub (or GitHub Enterprise) are present."""
        return self.github_token is not None or self.github_app_id is not None

    @property
    def effective_temporal_address(self) -> str:
        return self.temporal_address or f"127.0.0.1:{self.temporal_port}"  # the embedded server binds IPv4 loopback

    @property
    def ui_url(self) -> str:
        return (self.temporal_ui_url or f"http://localhost:{self.temporal_ui_port}").rstrip("/")

    def workflow_url(self, workflow_id: str) -> str:
        from urllib.parse import quote

        return f"{self.ui_url}/namespaces/{self.temporal_namespace}/workflows/{quote(workflow_id, safe='')}"

    def secret_values(self) -> list[str]:
        """Every configured secret, so logs can scrub them wherever they appear."""
        secrets = [
            self.openai_api_key,
            self.anthropic_api_key,
            self.temporal_api_key,
            self.webhook_secret,
            self.alert_token,
            self.sentry_client_secret,
            self.github_token,
            self.github_app_private_key,
        ]
        return [s.get_secret_value() for s in secrets if s and s.get_secret_value()]
