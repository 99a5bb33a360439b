"""Injected failures (`/_sim/faults`) and GitHub's rate-limit accounting and headers.

A fault matches API requests by method and a regex over the path (including `/api/v3`) and fails
the next `times` of them. `when="after"` lets the request apply fully and then loses the
response, which is what makes idempotent writes matter.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from shopfloor.simulator.errors import GitHubError

SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
DOCS_LIMITS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"


class FaultSpec(BaseModel):
    method: str = "*"
    path_regex: str
    status: int = Field(ge=400, le=599)
    retry_after: int | None = Field(default=None, ge=0)
    times: int = Field(default=1, ge=1)
    when: Literal["before", "after"] = "before"
    message: str | None = None

    @field_validator("path_regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value


@dataclass
class Fault:
    spec: FaultSpec
    remaining: int
    pattern: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        self.pattern = re.compile(self.spec.path_regex)

    def error(self) -> GitHubError:
        s = self.spec
        headers = {"Retry-After": str(s.retry_after)} if s.retry_after is not None else None
        if s.message:
            message = s.message
        elif s.status in (403, 429) and (s.retry_after is not None or s.status == 429):
            message = SECONDARY
        elif s.status >= 500:
            message = "Server Error"
        else:
            message = {
                401: "Bad credentials",
                403: "Forbidden",
                404: "Not Found",
                409: "Conflict",
                422: "Validation Failed",
            }.get(s.status, "Error")
        return GitHubError(
            s.status,
            message,
            headers=headers,
            docs=DOCS_LIMITS if s.status in (403, 429) else "https://docs.github.com/rest",
        )


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, spec: FaultSpec) -> None:
        with self._lock:
            self._faults.append(Fault(spec, spec.times))

    def list(self) -> list[dict]:
        with self._lock:
            return [{**f.spec.model_dump(), "remaining": f.remaining} for f in self._faults]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, method: str, path: str) -> Fault | None:
        """The first matching fault, consumed once; None when nothing matches."""
        with self._lock:
            for fault in self._faults:
                if fault.spec.method not in ("*", method.upper()) and fault.spec.method.upper() != method.upper():
                    continue
                if fault.pattern.search(path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
            return None


@dataclass
class Bucket:
    limit: int
    window_s: int
    used: int = 0
    reset: int = 0


class RateLimits:
    """Per token and resource (`core`, `search`), fixed windows like GitHub's; and GitHub's
    secondary limit on content-creating requests (writes per token per minute)."""

    def __init__(
        self, core_limit: int, search_limit: int, writes_per_minute: int = 80, retry_after_s: int = 60
    ) -> None:
        self._lock = threading.Lock()
        self._limits = {"core": (core_limit, 3600), "search": (search_limit, 60)}
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._writes_per_minute, self._retry_after_s = writes_per_minute, retry_after_s
        self._writes: dict[str, deque[float]] = {}
        self._blocked: dict[str, float] = {}  # token → when its secondary-limit wait ends

    def _bucket(self, key: str, resource: str) -> Bucket:
        limit, window = self._limits[resource]
        bucket = self._buckets.setdefault((key, resource), Bucket(limit, window))
        if bucket.reset <= time.time():
            bucket.used, bucket.reset = 0, int(time.time()) + window
        return bucket

    def charge(self, key: str, resource: str) -> tuple[dict[str, str], bool]:
        """Count one request: (headers, allowed). An exhausted bucket is not charged further."""
        with self._lock:
            b = self._bucket(key, resource)
            allowed = b.used < b.limit
            if allowed:
                b.used += 1
            return self._headers(b, resource), allowed

    def refund(self, key: str, resource: str) -> dict[str, str]:
        """Take back one request's charge (a 304: conditional requests cost nothing on GitHub)."""
        with self._lock:
            b = self._bucket(key, resource)
            b.used = max(0, b.used - 1)
            return self._headers(b, resource)

    def over_secondary(self, key: str) -> int | None:
        """Count one write; the seconds to wait (GitHub's `retry-after`) when this token wrote
        more than its secondary limit in the last minute, else None (and the write counts). A
        token that met the limit is refused until its wait is over, then starts afresh."""
        t = time.monotonic()
        with self._lock:
            until = self._blocked.get(key, 0.0)
            if t < until:
                return max(1, math.ceil(until - t))
            recent = self._writes.setdefault(key, deque())
            while recent and recent[0] <= t - 60:
                recent.popleft()
            if len(recent) >= self._writes_per_minute:
                self._blocked[key] = t + self._retry_after_s
                recent.clear()
                return self._retry_after_s
            recent.append(t)
            return None

    def peek(self, key: str, resource: str) -> dict[str, int]:
        with self._lock:
            b = self._bucket(key, resource)
            return {"limit": b.limit, "used": b.used, "remaining": max(0, b.limit - b.used), "reset": b.reset}

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()
            self._writes.clear()
            self._blocked.clear()

    @staticmethod
    def _headers(b: Bucket, resource: str) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(b.limit),
            "x-ratelimit-remaining": str(max(0, b.limit - b.used)),
            "x-ratelimit-used": str(b.used),
            "x-ratelimit-reset": str(b.reset),
            "x-ratelimit-resource": resource,
        }
