"""The one way to reach Temporal: `connect()` (pydantic data converter), search-attribute setup, and
signal-with-start of the factory workflows (`SignalWithStart`, built for each workflow here, sent by
`send_signal_with_start`) for the webhook edge and shopfloor's own starters alike."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, TLSConfig

from shopfloor.errors import TemporalUnreachable, UsageError
from shopfloor.models.inbox import (
    ALERT_SIGNAL,
    ALERT_WORKFLOW,
    GITHUB_EVENT_SIGNAL,
    ISSUE_WORKFLOW,
    PULL_REQUEST_WORKFLOW,
    Alert,
    AlertWorkflowInput,
    IssueWorkflowInput,
    PullRequestWorkflowInput,
    RepoEvent,
    alert_workflow_id,
    issue_workflow_id,
    pr_workflow_id,
)
from shopfloor.search_attributes import ALL_KEYS, SHOPFLOOR_ISSUE, SHOPFLOOR_REPO
from shopfloor.settings import Settings

_runtime: Runtime | None = None


def _runtime_with_forwarded_logs() -> Runtime:
    """The SDK's Rust core logs through Python logging (so through structlog), not raw to stderr."""
    global _runtime
    if _runtime is None:
        _runtime = Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(
                    filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                    forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
                )
            )
        )
    return _runtime


def _read_pem(path: Path, setting: str) -> bytes:
    """A PEM file's bytes, or a UsageError naming the setting (never the file's contents)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {setting} ({path}): {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise UsageError(f"{setting} ({path}) is not a PEM file (no -----BEGIN line)")
    return data


def tls_config(settings: Settings) -> TLSConfig | bool:
    """What Client.connect's `tls` gets: a TLSConfig when any certificate file is set (TLS on, with
    mTLS when the client pair is), else the SHOPFLOOR_TEMPORAL_TLS switch (system CAs)."""
    files = {
        "SHOPFLOOR_TEMPORAL_TLS_CERT_FILE": settings.temporal_tls_cert_file,
        "SHOPFLOOR_TEMPORAL_TLS_KEY_FILE": settings.temporal_tls_key_file,
        "SHOPFLOOR_TEMPORAL_TLS_CA_FILE": settings.temporal_tls_ca_file,
    }
    if not any(files.values()):
        return settings.temporal_tls
    pem = {setting: _read_pem(path, setting) if path else None for setting, path in files.items()}
    return TLSConfig(
        server_root_ca_cert=pem["SHOPFLOOR_TEMPORAL_TLS_CA_FILE"],
        client_cert=pem["SHOPFLOOR_TEMPORAL_TLS_CERT_FILE"],
        client_private_key=pem["SHOPFLOOR_TEMPORAL_TLS_KEY_FILE"],
    )


async def connect(settings: Settings, *, address: str | None = None, timeout_s: float = 10.0) -> Client:
    """Connect with shopfloor's data converter, or raise TemporalUnreachable saying what to do
    (UsageError for TLS files that cannot be read)."""
    target = address or settings.effective_temporal_address
    try:
        return await Client.connect(
            target,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            api_key=settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None,
            tls=tls_config(settings),
            connect_timeout=timedelta(seconds=timeout_s),
            runtime=_runtime_with_forwarded_logs(),
        )
    except RuntimeError as exc:  # the SDK reports connection failures as RuntimeError
        hint = (
            "set SHOPFLOOR_TEMPORAL_ADDRESS to a running server"
            if settings.temporal_address
            else "start one with `shopfloor dev`, or set SHOPFLOOR_TEMPORAL_ADDRESS"
        )
        raise TemporalUnreachable(f"cannot reach Temporal at {target}: {hint} ({exc})") from exc


async def missing_search_attributes(client: Client, namespace: str) -> list[str] | None:
    """shopfloor's search attributes the namespace lacks (a workflow that sets one fails its
    task until it is registered); None when the server cannot say (no operator access)."""
    try:
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    except RPCError:
        return None
    present = set(listed.custom_attributes) | set(listed.system_attributes)
    return sorted(key.name for key in ALL_KEYS if key.name not in present)


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register shopfloor's search attributes where missing; returns the names it added.

    Idempotent: attributes already present are left alone, so it is safe on every start.
    """
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    present = set(listed.custom_attributes) | set(listed.system_attributes)
    wanted = {
        key.name: IndexedValueType.ValueType(key.indexed_value_type) for key in ALL_KEYS if key.name not in present
    }
    if not wanted:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=wanted)
        )
    except RPCError as exc:
        # Another process may have registered them between our list and add.
        if "already exists" not in str(exc).lower():
            raise
    return sorted(wanted)


@dataclass(frozen=True)
class SignalWithStart:
    """Start `workflow_id` with `arg` unless it is running, and signal it `signal_arg`.

    Id policies (why): a *running* workflow of that id is always signalled (conflict policy
    USE_EXISTING), so every event about one issue reaches its one run. A *closed* one is started
    again only when `restart_closed` (reuse policy ALLOW_DUPLICATE: the event may start work);
    otherwise (REJECT_DUPLICATE) Temporal answers WorkflowAlreadyStartedError, so a follow-up
    event never revives a finished run.
    """

    workflow: str
    workflow_id: str
    arg: BaseModel
    signal: str
    signal_arg: BaseModel
    restart_closed: bool
    search_attributes: TypedSearchAttributes | None = None
    static_summary: str | None = None  # what the Temporal UI shows for the run (set by a start only)
    static_details: str | None = None  # the UI's longer description of the run (markdown)


def _repo_and_number(repo: str, number: int) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [SearchAttributePair(SHOPFLOOR_REPO, repo), SearchAttributePair(SHOPFLOOR_ISSUE, number)]
    )


def issue_workflow_start(event: RepoEvent, number: int, *, restart_closed: bool, started_by: str) -> SignalWithStart:
    """IssueWorkflow `issue/<repo>/<number>`, signalled `event` (`started_by` names who for the UI)."""
    return SignalWithStart(
        workflow=ISSUE_WORKFLOW,
        workflow_id=issue_workflow_id(event.repo, number),
        arg=IssueWorkflowInput(repo=event.repo, number=number),
        signal=GITHUB_EVENT_SIGNAL,
        signal_arg=event,
        restart_closed=restart_closed,
        search_attributes=_repo_and_number(event.repo, number),
        static_summary=f"{ISSUE_WORKFLOW} for {event.repo}#{number}, started by {started_by}",
        static_details=(
            f"One run for issue {event.repo}#{number}: its GitHub events arrive as `{GITHUB_EVENT_SIGNAL}` signals; "
            "the pipeline is triage → policy → fix → pull request → CI → review → merge, each agent a child run.\n"
            "- state: the `factory` query, or `shopfloor status` with this id\n"
            "- controls: `shopfloor pause|resume|cancel` with this id, or `/shopfloor stop` on the issue"
        ),
    )


def pull_request_workflow_start(
    event: RepoEvent, number: int, *, restart_closed: bool, started_by: str
) -> SignalWithStart:
    """PullRequestWorkflow `pr/<repo>/<number>`, signalled `event`."""
    return SignalWithStart(
        workflow=PULL_REQUEST_WORKFLOW,
        workflow_id=pr_workflow_id(event.repo, number),
        arg=PullRequestWorkflowInput(repo=event.repo, number=number),
        signal=GITHUB_EVENT_SIGNAL,
        signal_arg=event,
        restart_closed=restart_closed,
        search_attributes=_repo_and_number(event.repo, number),
        static_summary=f"{PULL_REQUEST_WORKFLOW} for {event.repo}#{number}, started by {started_by}",
        static_details=(
            f"One run for pull request {event.repo}#{number}: its GitHub events arrive as `{GITHUB_EVENT_SIGNAL}` "
            "signals; a review agent reviews each new head, and the run merges where the policy allows.\n"
            "- state: `shopfloor status` with this id"
        ),
    )


def alert_workflow_start(source: str, alert: Alert) -> SignalWithStart:
    """AlertWorkflow of one alert (its source and fingerprint), signalled the alert. A firing alert
    after its bug was closed is a regression: a new run. A late "resolved" never revives one."""
    workflow_id = alert_workflow_id(source, alert.fingerprint)
    return SignalWithStart(
        workflow=ALERT_WORKFLOW,
        workflow_id=workflow_id,
        arg=AlertWorkflowInput(source=source, fingerprint=alert.fingerprint, repo=alert.repo),
        signal=ALERT_SIGNAL,
        signal_arg=alert,
        restart_closed=alert.status == "firing",
        static_summary=f"{workflow_id} on {alert.repo or 'no repository (unrouted)'}",
        static_details=(
            f"One run for alert fingerprint `{alert.fingerprint}` from {source}: it assesses the alert, files one "
            "issue, starts that issue's run, and watches for the alert firing again or resolving.\n"
            "- state: `shopfloor status` with this id"
        ),
    )


async def send_signal_with_start(
    client: Client, task_queue: str, start: SignalWithStart, *, rpc_timeout: timedelta | None = None
) -> bool:
    """Send `start`; True when this call created the run. WorkflowAlreadyStartedError (the run is
    closed and `restart_closed` is false) and RPCError pass through."""
    handle = await client.start_workflow(
        start.workflow,
        start.arg,
        id=start.workflow_id,
        task_queue=task_queue,
        start_signal=start.signal,
        start_signal_args=[start.signal_arg],
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=(
            WorkflowIDReusePolicy.ALLOW_DUPLICATE if start.restart_closed else WorkflowIDReusePolicy.REJECT_DUPLICATE
        ),
        search_attributes=start.search_attributes,
        static_summary=start.static_summary,
        static_details=start.static_details,
        rpc_timeout=rpc_timeout,
    )
    # The signal-with-start response says whether this call created the run (private, but the
    # only place the SDK keeps it).
    response = getattr(handle, "_start_workflow_response", None)
    return bool(getattr(response, "started", False))


async def start_issue_workflow(
    client: Client, task_queue: str, event: RepoEvent, *, new_run: bool, started_by: str
) -> None:
    """Signal-with-start `issue/<repo>/<n>` with `event`, as shopfloor's own starters do (the
    reconciler, AlertWorkflow, `shopfloor run issue`). `new_run`: a finished run may be followed by
    a new one; else WorkflowAlreadyStartedError says it finished. RPCError passes through."""
    if event.number is None:
        raise ValueError(f"an event without an issue number cannot start an issue workflow ({event.event})")
    start = issue_workflow_start(event, event.number, restart_closed=new_run, started_by=started_by)
    await send_signal_with_start(client, task_queue, start)
