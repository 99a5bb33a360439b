"""What a worker remembers of GitHub's answers to the reads it repeats, so it can ask again
conditionally: `If-None-Match` with the answer's `ETag`, and a `304 Not Modified` reuses the
remembered body. On GitHub a 304 does not count against the rate limit, which is what a run
polling CI for an hour needs.

Bounded (least recently used goes first) and keyed by who asked (the session's key) as well as
what was asked, since GitHub's answers differ by credentials.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MAX_REMEMBERED = 256


@dataclass(frozen=True)
class Remembered:
    etag: str
    headers: dict[str, Any]
    data: Any


class ConditionalCache:
    def __init__(self, size: int = MAX_REMEMBERED) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], Remembered] = OrderedDict()

    def get(self, who: str, url: str) -> Remembered | None:
        with self._lock:
            found = self._items.get((who, url))
            if found is not None:
                self._items.move_to_end((who, url))
            return found

    def put(self, who: str, url: str, answer: Remembered) -> None:
        with self._lock:
            self._items[(who, url)] = answer
            self._items.move_to_end((who, url))
            while len(self._items) > self._size:
                self._items.popitem(last=False)
