"""Which files in a directory were opened, and how often, seen from outside the process that opens
them: Linux inotify (IN_OPEN) on the directory, read in a thread of the test process.

The kernel reports each open(2) of an entry of the watched directory, by the name it was opened
through, whichever process did it, so a test counts how often a worker process really read each
file without touching the worker's code. `on_open(name)` runs in the watcher thread as each open
is seen (quick: it can stop a process before it gets further). Through ctypes: the standard
library has no inotify binding, and the counts need nothing beyond these three calls.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

IN_OPEN = 0x00000020
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name


class FileOpens:
    def __init__(self, directory: Path, on_open: Callable[[str], None] | None = None) -> None:
        self.directory = directory
        self.on_open = on_open
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = -1
        self._thread = threading.Thread(target=self._watch, name="file-opens", daemon=True)

    def __enter__(self) -> FileOpens:
        self._fd = self._libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if self._libc.inotify_add_watch(self._fd, os.fsencode(self.directory), IN_OPEN) < 0:
            os.close(self._fd)
            raise OSError(ctypes.get_errno(), f"inotify_add_watch failed on {self.directory}")
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        os.close(self._fd)

    def count(self, name: str) -> int:
        with self._lock:
            return self.counts[name]

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)

    def _watch(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                continue
            offset = 0
            while offset < len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset : offset + length].rstrip(b"\0").decode()
                offset += length
                if mask & IN_OPEN and name:  # no name: the directory itself was opened
                    with self._lock:
                        self.counts[name] += 1
                    if self.on_open is not None:
                        self.on_open(name)
