"""The worker's composition root: which workflows and activities run, wired to their dependencies."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import structlog
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from shopfloor.activities.alert_goal import AlertGoalActivities
from shopfloor.activities.environment import Environments
from shopfloor.activities.eval import EvalActivities
from shopfloor.activities.eval_factory import EvalFactoryActivities
from shopfloor.activities.factory import FactoryActivities
from shopfloor.activities.factory_config import FactoryConfigActivity
from shopfloor.activities.git_remote import GitRemoteActivities
from shopfloor.activities.github.alert_issues import AlertIssueActivities
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.github.deliveries import DeliveryActivities
from shopfloor.activities.github.operations import GitHubActivities
from shopfloor.activities.ledger import LedgerActivities
from shopfloor.activities.live_progress import LiveProgressActivities
from shopfloor.activities.mcp_tools import McpActivities
from shopfloor.activities.model_step import ModelStepActivities, ProviderFactory
from shopfloor.activities.providers.base import ModelProvider
from shopfloor.activities.providers.registry import open_provider
from shopfloor.activities.pull_requests import PullRequestActivities
from shopfloor.activities.reconcile import ReconcileActivities
from shopfloor.activities.repo_profile import RepoProfileActivities
from shopfloor.activities.sandbox import SandboxConfig, resolve_mode
from shopfloor.activities.sandbox_facts import SandboxFactsActivities
from shopfloor.activities.sandbox_limits import check_cgroup_setting, enforcement
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.activities.tools.activities import ToolActivities
from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.activities.workspace import Workspaces
from shopfloor.activities.workspace_setup import WorkspaceSetupActivities
from shopfloor.agents.budget import Price
from shopfloor.blobs import BlobStore, open_blob_store
from shopfloor.errors import ShopfloorError
from shopfloor.models.model_spec import ModelSpec
from shopfloor.settings import Settings
from shopfloor.sticky_reset import ResetStickyOnRetry
from shopfloor.temporal import missing_search_attributes
from shopfloor.worker_metrics import bind_worker_metrics, serving_worker_metrics, with_sdk_metrics
from shopfloor.workflows.agent import AgentWorkflow
from shopfloor.workflows.alert import AlertWorkflow
from shopfloor.workflows.eval_run import EvalWorkflow
from shopfloor.workflows.issue import IssueWorkflow
from shopfloor.workflows.ledger import LedgerWorkflow
from shopfloor.workflows.merge_verify import MergeVerifyWorkflow
from shopfloor.workflows.pull_request import PullRequestWorkflow
from shopfloor.workflows.reconcile import ReconcileWorkflow

log = structlog.get_logger(__name__)

# How often an activity's heartbeat reaches the server at most. Temporal's default (80 % of the
# heartbeat timeout: 24 s for a model call) would hide a model's text from the live view for that
# long; a model call heartbeats its text about once a second while it streams (docs/scaling.md).
HEARTBEAT_THROTTLE = timedelta(seconds=1)

# ReconcileWorkflow runs on a Schedule (shopfloor.reconcile_schedule), not from webhooks.
WORKFLOWS: list[type] = [
    AgentWorkflow,
    IssueWorkflow,
    PullRequestWorkflow,
    AlertWorkflow,
    ReconcileWorkflow,
    EvalWorkflow,
    LedgerWorkflow,
    MergeVerifyWorkflow,
]

# The strict default sandbox, with pure third-party libraries passed through (imported once,
# shared with the worker) instead of re-imported for every workflow task.
SANDBOX = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("pydantic", "pydantic_core", "annotated_types")
)


class ProviderCache:
    """One provider (and its HTTP connection pool) per model spec, per worker."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._providers: dict[str, ModelProvider] = {}
        self._opening = threading.Lock()  # `prewarm` opens providers from a thread

    def __call__(self, spec: ModelSpec) -> ModelProvider:
        key = str(spec)
        # Without the lock once open: every model step asks, and taking the lock would stall the
        # event loop (every run's tasks on this worker) while prewarm opens another model.
        if (provider := self._providers.get(key)) is not None:
            return provider
        with self._opening:
            if key in self._providers:
                return self._providers[key]
            s = self._settings
            self._providers[key] = open_provider(
                spec,
                openai_api_key=s.openai_api_key.get_secret_value() if s.openai_api_key else None,
                openai_base_url=s.openai_base_url,
                anthropic_api_key=s.anthropic_api_key.get_secret_value() if s.anthropic_api_key else None,
                anthropic_base_url=s.anthropic_base_url,
            )
        return self._providers[key]

    async def get(self, spec: ModelSpec) -> ModelProvider:
        """The spec's provider, opened in a thread the first time. Opening imports the provider's
        SDK (seconds on a loaded machine) or waits for `prewarm` to finish doing so; on the event
        loop that stalled every run on the worker, a model call's heartbeats too, and a short
        heartbeat timeout then had Temporal start the call again beside the first."""
        if (provider := self._providers.get(str(spec))) is not None:
            return provider
        return await asyncio.to_thread(self, spec)

    def prewarm(self, models: list[str]) -> None:
        """Open the configured models' providers ahead of their first call (blocking; run_worker
        runs it in a thread while the worker starts polling): opening one imports its SDK, seconds
        that inside a model call's first attempt could outlast a short heartbeat timeout. Failures
        wait for the call that needs it."""
        for model in dict.fromkeys(models):
            try:
                self(ModelSpec.parse(model))
            except Exception as exc:  # noqa: BLE001 - the model call reports it, with its own error
                log.info("model provider not opened at start", model=model, error=str(exc)[:200])

    async def aclose(self) -> None:
        await asyncio.gather(*(p.aclose() for p in self._providers.values()), return_exceptions=True)
        self._providers.clear()


def activities_for(
    settings: Settings,
    blobs: BlobStore,
    providers: ProviderFactory,
    github: GitHubClients | None = None,
    client: Client | None = None,
) -> list[Callable[..., Any]]:
    """The activities that need no Temporal client, and with `client` those that start and follow
    other workflows through it (`shopfloor eval run --agents factory`)."""
    prices = {name: Price(input_per_mtok=i, output_per_mtok=o) for name, (i, o) in settings.prices.items()}
    model = ModelStepActivities(TranscriptStore(blobs), providers, prices, settings.image_models)
    workspaces = Workspaces(settings.data_dir / "workspaces", blobs, max_checkpoint_bytes=settings.max_checkpoint_bytes)
    environments = Environments(workspaces.root, blobs, max_bytes=settings.max_environment_bytes)
    sandbox = SandboxConfig.from_settings(settings)
    hide = [settings.data_dir, Path.home()]  # commands never see the worker's data (blobs, checkouts) or home
    # What commands that may use the network reach: the operator's bound and mirrors, and never
    # the worker's own services (Temporal, blob store, GitHub).
    network = SandboxNetwork.from_settings(settings)
    tools = ToolActivities(blobs, workspaces, sandbox=sandbox, hide=hide, network=network, environments=environments)
    setup = WorkspaceSetupActivities(workspaces, environments, sandbox=sandbox, hide=hide, network=network)
    # Without credentials the client still targets settings.github_api_url; calls then fail with
    # a clear "no GitHub credentials are configured" (401) instead of at startup.
    github = github or GitHubClients(settings)
    github_ops = GitHubActivities(github)
    git_remote = GitRemoteActivities(workspaces, github)  # pushes with the worker's own token
    config = FactoryConfigActivity(settings)
    return [
        model.model_step,
        model.compact_transcript,
        *tools.all(),
        *SandboxFactsActivities(workspaces, environments, sandbox=sandbox, hide=hide).all(),
        *McpActivities(
            blobs, settings.mcp_servers, sandbox=sandbox, hide=hide, network_allow=settings.sandbox_network_allow
        ).all(),
        *setup.all(),
        *github_ops.all(),
        *git_remote.all(),
        config.factory_config,
        *FactoryActivities(blobs, github).all(),
        *RepoProfileActivities(workspaces, github, blobs).all(),
        *PullRequestActivities(github, blobs).all(),
        *AlertGoalActivities().all(),
        *EvalActivities(blobs, workspaces, sandbox=sandbox, hide=hide).all(),
        *(EvalFactoryActivities(client, settings, blobs, workspaces).all() if client is not None else []),
    ]


def reconciler_activities(
    client: Client, settings: Settings, blobs: BlobStore, clients: GitHubClients
) -> list[Callable[..., Any]]:
    """The reconciler's activities: GitHub's delivery log, and starts through this worker's client."""
    starter = ReconcileActivities(client, clients, blobs, task_queue=settings.task_queue)
    return [*DeliveryActivities(clients).all(), *starter.all()]


def alert_activities(
    client: Client, settings: Settings, blobs: BlobStore, clients: GitHubClients
) -> list[Callable[..., Any]]:
    """The AlertWorkflow's activities: file and reopen its issue, and start and follow the issue's
    IssueWorkflow through this worker's client."""
    return AlertIssueActivities(client, clients, blobs, task_queue=settings.task_queue).all()


def worker_activities(
    client: Client,
    settings: Settings,
    blobs: BlobStore,
    providers: ProviderFactory,
    github: GitHubClients,
) -> list[Callable[..., Any]]:
    """Every activity a worker registers (tests/unit/test_activity_catalogue.py holds them against
    the workflows' activity catalogue)."""
    return [
        *activities_for(settings, blobs, providers, github, client),
        *reconciler_activities(client, settings, blobs, github),
        *alert_activities(client, settings, blobs, github),
        *LedgerActivities(client, task_queue=settings.task_queue).all(),
        # The progress comment's live checklist reads the agent runs through this worker's client.
        *LiveProgressActivities(client, github, edit_s=settings.progress_edit_seconds).all(),
    ]


def build_worker(
    client: Client,
    settings: Settings,
    *,
    providers: ProviderCache,
    blobs: BlobStore | None = None,
    task_queue: str | None = None,
    graceful_shutdown: timedelta = timedelta(),
    strict_sandbox: bool = False,
) -> Worker:
    """`strict_sandbox`: run even the workflows marked `sandboxed=False` (AgentWorkflow, the hot
    path) inside the sandbox, as the tests do, so a non-deterministic call in them fails there."""
    blobs = blobs or open_blob_store(
        url=settings.blob_url, data_dir=settings.data_dir, s3_endpoint_url=settings.s3_endpoint_url
    )
    # One GitHub client set per worker: one token cache and one write lock per installation.
    github = GitHubClients(settings)
    return Worker(
        client,
        task_queue=task_queue or settings.task_queue,
        workflows=WORKFLOWS,
        activities=worker_activities(client, settings, blobs, providers.get, github),
        workflow_runner=SANDBOX,
        unsandboxed_workflow_runner=SANDBOX if strict_sandbox else UnsandboxedWorkflowRunner(),
        max_cached_workflows=settings.max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_queue_timeout_seconds),
        max_concurrent_activities=settings.max_concurrent_activities,
        graceful_shutdown_timeout=graceful_shutdown,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        # A retried activity's result is not offered to a dead worker's sticky queue first.
        interceptors=[ResetStickyOnRetry(client)],
    )


def freeze_imports(_: object = None) -> None:
    """Leave what the process holds so far (modules, the SDKs' imports: some 300k objects) out of
    every later garbage collection: a full collection scanned them all, a pause of 100 ms and more
    in the middle of other runs' steps. Nothing frozen is ever freed, so only what is meant to live
    as long as the process goes in: call it once, after imports and the providers' prewarm."""
    gc.freeze()


async def run_worker(client: Client, settings: Settings, *, graceful: bool = True) -> None:
    """Run until cancelled; on cancellation, stop taking tasks and give running activities
    `worker_shutdown_grace_seconds` to finish (`graceful=False`: cancel them at once)."""
    sandbox = SandboxConfig.from_settings(settings)
    mode, note = resolve_mode(sandbox)  # SHOPFLOOR_SANDBOX=bwrap without bubblewrap stops here
    if mode == "refuse":
        log.error("commands will be REFUSED", sandbox=settings.sandbox, reason=note)
    elif note:
        log.warning("commands will run UNSANDBOXED", sandbox=settings.sandbox, reason=note)
    # Which of a command's total limits hold on this machine, and by what means.
    check_cgroup_setting(sandbox.cgroup)  # a cgroup the operator named that does not work stops here
    log.info("command limits", sandbox=mode, **enforcement(sandbox.cgroup, sandbox.scratch_dir))
    missing = await missing_search_attributes(client, settings.temporal_namespace)
    if missing:  # every run would fail its first task that sets one: refuse now, saying what to do
        raise ShopfloorError(
            f"the Temporal namespace {settings.temporal_namespace!r} lacks shopfloor's search attributes "
            f"{', '.join(missing)}: run `shopfloor setup` against it once (it is idempotent), then start the worker"
        )
    if missing is None:
        log.warning("could not check the namespace's search attributes; if runs fail, run `shopfloor setup`")
    # The SDK's metrics need a client on a Runtime that exports them: this worker's own.
    client = await with_sdk_metrics(client, settings)
    metrics_socket = bind_worker_metrics(settings)  # a port set that is taken stops the worker here
    providers = ProviderCache(settings)
    # Beside the start, not before it: a replacement for a crashed worker polls seconds sooner.
    warming = asyncio.create_task(
        asyncio.to_thread(providers.prewarm, [settings.model, *settings.agent_models.values()])
    )
    warming.add_done_callback(freeze_imports)
    grace = timedelta(seconds=settings.worker_shutdown_grace_seconds if graceful else 0)
    worker = build_worker(client, settings, providers=providers, graceful_shutdown=grace)
    log.info("worker started", task_queue=settings.task_queue, namespace=settings.temporal_namespace, sandbox=mode)
    try:
        async with serving_worker_metrics(client, settings, worker, metrics_socket):  # /metrics, /healthz, /readyz
            await worker.run()
    finally:
        await asyncio.shield(warming)  # a thread cannot be stopped: let it finish, then close all
        await providers.aclose()
