"""The one way to reach Temporal: `connect()` (pydantic data converter) and search-attribute setup."""

from __future__ import annotations

import logging
from datetime import timedelta

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
from temporalio.service import RPCError

from shopfloor.errors import TemporalUnreachable
from shopfloor.models.inbox import GITHUB_EVENT_SIGNAL, ISSUE_WORKFLOW, IssueWorkflowInput, RepoEvent, issue_workflow_id
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


async def connect(settings: Settings, *, address: str | None = None, timeout_s: float = 10.0) -> Client:
    """Connect with shopfloor's data converter, or raise TemporalUnreachable saying what to do."""
    target = address or settings.effective_temporal_address
    try:
        return await Client.connect(
            target,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            api_key=settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None,
            tls=settings.temporal_tls,
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


async def start_issue_workflow(
    client: Client, task_queue: str, event: RepoEvent, *, new_run: bool, started_by: str
) -> None:
    """Signal-with-start `issue/<repo>/<n>` with `event`, as shopfloor's own starters do (the
    reconciler, AlertWorkflow, `shopfloor run issue`). `new_run`: a finished run may be followed by
    a new one; else WorkflowAlreadyStartedError says it finished. RPCError passes through."""
    assert event.number is not None
    await client.start_workflow(
        ISSUE_WORKFLOW,
        IssueWorkflowInput(repo=event.repo, number=event.number),
        id=issue_workflow_id(event.repo, event.number),
        task_queue=task_queue,
        start_signal=GITHUB_EVENT_SIGNAL,
        start_signal_args=[event],
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if new_run else WorkflowIDReusePolicy.REJECT_DUPLICATE,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SHOPFLOOR_REPO, event.repo), SearchAttributePair(SHOPFLOOR_ISSUE, event.number)]
        ),
        static_summary=f"{ISSUE_WORKFLOW} for {event.repo}#{event.number}, started by {started_by}",
    )
