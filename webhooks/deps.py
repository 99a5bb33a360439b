"""What the edge's routers share: settings, the Temporal starter, metrics, the blob store and the
memory of accepted bodies."""

from __future__ import annotations

from dataclasses import dataclass

from shopfloor.blobs import BlobStore
from shopfloor.settings import Settings
from shopfloor.webhooks.delivered_bodies import BodyMemory
from shopfloor.webhooks.metrics import EdgeMetrics
from shopfloor.webhooks.starting import Starter


@dataclass
class EdgeDeps:
    settings: Settings
    starter: Starter
    metrics: EdgeMetrics
    blobs: BlobStore
    bodies: BodyMemory
