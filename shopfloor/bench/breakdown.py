"""Where an agent step's time goes: the provider call, the rest of model_step, tool calls, blob I/O.

The in-memory runner (shopfloor.bench.workload) times the model and tool activities it calls
directly, the provider's `complete` inside model_step, and every call of the blob store they
share; the loop's own share is what is left of the run. Temporal's share is not measured here:
it is the durable step's time minus the in-memory step's, from the same session.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from shopfloor.activities.model_step import ProviderFactory
from shopfloor.activities.providers.base import ModelProvider
from shopfloor.blobs import BlobStore
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.transcript import ModelReply, ModelRequest

T = TypeVar("T")


class StepBreakdown(BaseModel):
    """Milliseconds per step of one in-memory run, and its blob traffic per step."""

    steps: int
    total_ms: float  # the in-memory step
    model_call_ms: float  # inside the provider's `complete` (request, HTTP, the fake model, the reply)
    model_step_rest_ms: float  # model_step around it, blob I/O excluded (transcript, request building)
    tool_ms: float  # the tool activities, blob I/O excluded
    blob_io_ms: float  # every blob store call, by model_step and the tools (not while the provider call runs)
    loop_ms: float  # the loop's own code (agents/loop.py): the rest of the step
    temporal_ms: float | None = None  # durable step − in-memory step, where a durable run beside it was timed
    blob_reads: float  # blob store reads (get, get_file, get_ref, exists) per step
    blob_writes: float  # blob store writes (put, put_file, put_ref) per step
    blob_read_bytes: float  # bytes read per step (get)

    def describe(self) -> str:
        temporal = f"; Temporal {self.temporal_ms:+.1f}" if self.temporal_ms is not None else ""
        return (
            f"in memory {self.total_ms:.1f} ms/step = model call {self.model_call_ms:.1f} (inside the provider) "
            f"+ model_step's rest {self.model_step_rest_ms:.1f} + tool calls {self.tool_ms:.1f} + blob I/O "
            f"{self.blob_io_ms:.1f} + loop {self.loop_ms:.1f}{temporal}; blob reads {self.blob_reads:.1f}/step "
            f"({self.blob_read_bytes / 1024:.1f} KB), writes {self.blob_writes:.1f}/step"
        )


class Timeline:
    """Wall time by what is under way, each instant counted once: to the provider call when one is
    in flight, else to blob I/O when a blob call is (model_step may write blobs while it waits
    for the model)."""

    KINDS = ("provider", "blob")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.KINDS, 0.0)
        self._active = dict.fromkeys(self.KINDS, 0)
        self._since = time.perf_counter()

    def _advance(self) -> None:
        now = time.perf_counter()
        kind = next((k for k in self.KINDS if self._active[k]), None)
        if kind is not None:
            self.seconds[kind] += now - self._since
        self._since = now

    async def timed(self, kind: str, call: Awaitable[T]) -> T:
        self._advance()
        self._active[kind] += 1
        try:
            return await call
        finally:
            self._advance()
            self._active[kind] -= 1


class TimedBlobStore:
    """A BlobStore that counts every call of the one it wraps, and times them on `timeline`."""

    def __init__(self, inner: BlobStore, timeline: Timeline) -> None:
        self.inner = inner
        self.timeline = timeline
        self.reads = 0
        self.writes = 0
        self.read_bytes = 0

    @property
    def seconds(self) -> float:
        return self.timeline.seconds["blob"]

    async def _timed(self, write: bool, call: Awaitable[T]) -> T:
        try:
            return await self.timeline.timed("blob", call)
        finally:
            if write:
                self.writes += 1
            else:
                self.reads += 1

    async def put(self, data: bytes) -> str:
        return await self._timed(True, self.inner.put(data))

    async def get(self, digest: str) -> bytes:
        data = await self._timed(False, self.inner.get(digest))
        self.read_bytes += len(data)
        return data

    async def exists(self, digest: str) -> bool:
        return await self._timed(False, self.inner.exists(digest))

    async def put_file(self, path: Path) -> str:
        return await self._timed(True, self.inner.put_file(path))

    async def get_file(self, digest: str, dest: Path) -> int:
        size = await self._timed(False, self.inner.get_file(digest, dest))
        self.read_bytes += size
        return size

    async def put_ref(self, name: str, digest: str) -> None:
        await self._timed(True, self.inner.put_ref(name, digest))

    async def get_ref(self, name: str) -> str | None:
        return await self._timed(False, self.inner.get_ref(name))


class _TimedProvider:
    def __init__(self, inner: ModelProvider, clock: TimedProviders) -> None:
        self.inner = inner
        self.clock = clock
        self.label = inner.label

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        try:
            return await self.clock.timeline.timed("provider", self.inner.complete(request, on_text=on_text))
        finally:
            self.clock.calls += 1

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:  # anything else a provider offers, untimed
        return getattr(self.inner, name)


class TimedProviders:
    """model_step's provider factory, its providers' `complete` timed."""

    def __init__(self, inner: ProviderFactory, timeline: Timeline) -> None:
        self.inner = inner
        self.timeline = timeline
        self.calls = 0
        self._wrapped: dict[int, _TimedProvider] = {}

    @property
    def seconds(self) -> float:
        return self.timeline.seconds["provider"]

    async def __call__(self, spec: ModelSpec) -> ModelProvider:
        provider = await self.inner(spec)
        return self._wrapped.setdefault(id(provider), _TimedProvider(provider, self))


class StepClock:
    """The in-memory run's timers: the activities as the loop calls them, the provider and the
    blob store inside them."""

    def __init__(self, blobs: TimedBlobStore, providers: TimedProviders) -> None:
        self.blobs = blobs
        self.providers = providers
        self.model_s = 0.0
        self.model_blob_s = 0.0
        self.tool_s = 0.0
        self.tool_blob_s = 0.0

    async def model(self, call: Any) -> Any:
        blob_before, start = self.blobs.seconds, time.perf_counter()
        try:
            return await call
        finally:
            self.model_s += time.perf_counter() - start
            self.model_blob_s += self.blobs.seconds - blob_before

    async def tool(self, call: Any) -> Any:
        blob_before, start = self.blobs.seconds, time.perf_counter()
        try:
            return await call
        finally:
            self.tool_s += time.perf_counter() - start
            self.tool_blob_s += self.blobs.seconds - blob_before

    def breakdown(self, steps: int, total_s: float) -> StepBreakdown:
        per = 1000 / steps
        return StepBreakdown(
            steps=steps,
            total_ms=total_s * per,
            model_call_ms=self.providers.seconds * per,
            model_step_rest_ms=(self.model_s - self.providers.seconds - self.model_blob_s) * per,
            tool_ms=(self.tool_s - self.tool_blob_s) * per,
            blob_io_ms=self.blobs.seconds * per,
            loop_ms=(total_s - self.model_s - self.tool_s) * per,
            blob_reads=self.blobs.reads / steps,
            blob_writes=self.blobs.writes / steps,
            blob_read_bytes=self.blobs.read_bytes / steps,
        )
