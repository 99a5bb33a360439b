"""A worker does not start on a namespace that lacks shopfloor's search attributes: every run
would fail the first task that sets one (ShopfloorCostUsd is new). It says to run `setup`."""

from __future__ import annotations

import uuid

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest

from shopfloor.errors import ShopfloorError
from shopfloor.search_attributes import ALL_KEYS
from shopfloor.settings import Settings
from shopfloor.temporal import connect, ensure_search_attributes, missing_search_attributes
from shopfloor.worker import run_worker


async def test_a_namespace_without_the_search_attributes_is_refused_until_setup(
    temporal_server, temporal_client, tmp_path
):
    namespace = f"bare-{uuid.uuid4().hex[:8]}"
    await temporal_client.workflow_service.register_namespace(
        RegisterNamespaceRequest(namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400))
    )
    settings = Settings(
        temporal_address=temporal_server.address,
        temporal_namespace=namespace,
        data_dir=tmp_path / "data",
        task_queue=f"q-{uuid.uuid4().hex[:6]}",
    )
    client = await connect(settings)
    assert await missing_search_attributes(client, namespace) == sorted(k.name for k in ALL_KEYS)
    with pytest.raises(ShopfloorError) as refused:
        await run_worker(client, settings)
    said = str(refused.value)
    assert "ShopfloorCostUsd" in said and "run `shopfloor setup`" in said and namespace in said
    assert sorted(await ensure_search_attributes(client, namespace)) == sorted(k.name for k in ALL_KEYS)
    assert await missing_search_attributes(client, namespace) == []
