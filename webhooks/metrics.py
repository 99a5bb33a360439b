"""Prometheus metrics of the edge, in a registry of their own (one per app, so apps and tests never
collide in the global registry)."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)


class EdgeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.deliveries = Counter(
            "shopfloor_webhook_deliveries",
            "Webhook deliveries by source, event and outcome.",
            ["source", "event", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "shopfloor_webhook_latency_seconds",
            "Time from request to answer, by source.",
            ["source"],
            registry=self.registry,
        )

    def observe(self, *, source: str, event: str, outcome: str, seconds: float) -> None:
        """Count one delivery (source: github | alertmanager | sentry | generic)."""
        # Event names come from senders: keep label cardinality bounded.
        self.deliveries.labels(source=source[:32], event=(event or "unknown")[:64], outcome=outcome[:32]).inc()
        self.latency.labels(source=source[:32]).observe(max(seconds, 0.0))

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
