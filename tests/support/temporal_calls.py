"""Counting what a Temporal client is asked to do: a client interceptor that records every
outbound call (name and input), on a copy of a real client."""

from __future__ import annotations

import inspect
from typing import Any

from temporalio.client import Client, Interceptor, OutboundInterceptor

CALLS = [name for name, fn in vars(OutboundInterceptor).items() if inspect.iscoroutinefunction(fn)]


class CountingInterceptor(Interceptor):
    """Records (call name, input) of every outbound client call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        calls = self.calls

        def recorded(name: str) -> Any:
            async def call(self: OutboundInterceptor, input: Any) -> Any:
                calls.append((name, input))
                return await getattr(self.next, name)(input)

            return call

        counting = type("CountingOutbound", (OutboundInterceptor,), {name: recorded(name) for name in CALLS})
        return counting(next)


def counted_client(client: Client, counter: CountingInterceptor) -> Client:
    config = client.config()
    config["interceptors"] = [*config["interceptors"], counter]
    return Client(**config)
