"""Signed webhook deliveries: one sender thread per hook, so each hook receives its events in the
order they happened, never inline in the request that caused them (GitHub delivers async).

An event goes to its repository's hooks and, when one is set, to the GitHub App's own webhook
(`Store.app_hook`) for every repository the App is installed on (not people's forks).

Every attempt is recorded (status code 0 when the target could not be reached) and never retried
automatically, as on GitHub; `redeliver` sends a recorded delivery again with the same guid.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import traceback
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
import structlog

from shopfloor.github_signature import sign, sign_sha1
from shopfloor.simulator.store import Delivery, Hook, Repo, Store, now

log = structlog.get_logger(__name__)
USER_AGENT = "GitHub-Hookshot/simulator"
_STOP = object()


class Busy:
    """Counts queued background work (deliveries, CI runs) so tests can wait for quiet."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending = 0

    def add(self, n: int = 1) -> None:
        with self._cond:
            self._pending += n

    def done(self) -> None:
        with self._cond:
            self._pending -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._pending <= 0, timeout=timeout)

    def reset(self) -> None:
        with self._cond:
            self._pending = 0
            self._cond.notify_all()


def hook_wants(hook: Hook, event: str) -> bool:
    return hook.active and ("*" in hook.events or event in hook.events)


class Dispatcher:
    def __init__(self, store: Store, busy: Busy, *, timeout_s: float) -> None:
        self.store, self.busy, self.timeout_s = store, busy, timeout_s
        self._lock = threading.Lock()
        self._queues: dict[int, queue.Queue[Any]] = {}
        self._threads: list[threading.Thread] = []
        self._stopped = False

    # ---- creating deliveries ---------------------------------------------------------------
    def emit(self, repo: Repo, event: str, payload: dict[str, Any], *, only_hook: Hook | None = None) -> str:
        """Record and queue one event for every hook of `repo` that wants it, and for the App's
        webhook when the App is installed on `repo` (`only_hook`: that hook alone); returns its guid."""
        guid = str(uuid.uuid4())
        with self.store.lock:
            if only_hook:
                hooks = [only_hook]
            else:
                hooks = [h for h in repo.hooks.values() if hook_wants(h, event)]
                app_hook = self.store.app_hook
                # The App is installed on every repository but people's forks (auth.permission).
                if app_hook is not None and app_hook.url and hook_wants(app_hook, event) and repo.parent is None:
                    hooks.append(app_hook)
            for hook in hooks:
                # `installation` is in what an App's webhook gets, never in a repository hook's delivery.
                body = payload if hook.app_id is not None else {k: v for k, v in payload.items() if k != "installation"}
                delivery = self._record(hook, event, body, repository_id=repo.id, guid=guid, redelivery=False)
                self._enqueue(hook.id, delivery)
        return guid

    def redeliver(self, hook: Hook, original: Delivery) -> Delivery:
        """`original` again, to `hook`'s current URL and secret, with the same guid."""
        delivery = self._record(
            hook,
            original.event,
            original.payload,
            repository_id=original.repository_id,
            guid=original.guid,
            redelivery=True,
        )
        self._enqueue(hook.id, delivery)
        return delivery

    def _record(
        self, hook: Hook, event: str, payload: dict[str, Any], *, repository_id: int | None, guid: str, redelivery: bool
    ) -> Delivery:
        raw = json.dumps(payload, separators=(",", ":")).encode()
        if hook.content_type == "form":
            body, ctype = urlencode({"payload": raw.decode()}).encode(), "application/x-www-form-urlencoded"
        else:
            body, ctype = raw, "application/json"
        headers = {
            "Accept": "*/*",
            "Content-Type": ctype,
            "User-Agent": USER_AGENT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": guid,
            "X-GitHub-Hook-ID": str(hook.id),
            # What the hook is installed on: the App ("integration") for its own webhook.
            "X-GitHub-Hook-Installation-Target-Type": "integration" if hook.app_id is not None else "repository",
            "X-GitHub-Hook-Installation-Target-ID": str(hook.app_id if hook.app_id is not None else repository_id),
        }
        if hook.secret:
            headers["X-Hub-Signature"] = sign_sha1(hook.secret.encode(), body)
            headers["X-Hub-Signature-256"] = sign(hook.secret.encode(), body)
        installation = payload.get("installation") or {}
        delivery = Delivery(
            id=self.store.new_id(),
            guid=guid,
            hook_id=hook.id,
            event=event,
            action=payload.get("action"),
            repository_id=repository_id,
            installation_id=installation.get("id"),
            url=hook.url,
            request_headers=headers,
            body=body,
            payload=payload,
            redelivery=redelivery,
        )
        with self.store.lock:
            self.store.deliveries.append(delivery)
        return delivery

    def _enqueue(self, hook_id: int, delivery: Delivery) -> None:
        with self._lock:
            if self._stopped:
                return
            q = self._queues.get(hook_id)
            if q is None:
                q = self._queues[hook_id] = queue.Queue()
                thread = threading.Thread(target=self._run, args=(q,), name=f"sim-hook-{hook_id}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self.busy.add()
            q.put(delivery)

    # ---- sending -----------------------------------------------------------------------------
    def _run(self, q: queue.Queue[Any]) -> None:
        with httpx.Client(timeout=self.timeout_s, follow_redirects=False) as client:
            while True:
                item = q.get()
                if item is _STOP:
                    return
                try:
                    self._send(client, item)
                except Exception:  # noqa: BLE001 - a sender thread must survive anything one delivery does
                    log.error("webhook_delivery_crashed", delivery_id=item.id, error=traceback.format_exc())
                finally:
                    self.busy.done()

    def _send(self, client: httpx.Client, d: Delivery) -> None:
        started = time.monotonic()
        d.delivered_at = now()
        try:
            resp = client.post(d.url, content=d.body, headers=d.request_headers)
            d.status_code = resp.status_code
            d.response_headers = dict(resp.headers)
            d.response_body = resp.text[:10_000]
            d.status = "OK" if 200 <= resp.status_code < 300 else f"Invalid HTTP Response: {resp.status_code}"
        except httpx.TimeoutException:
            d.status_code, d.status = 0, "timed out"
        except httpx.HTTPError as exc:
            d.status_code, d.status = 0, f"failed to connect to host: {type(exc).__name__}"
        d.duration = round(time.monotonic() - started, 3)
        found = self.store.hook(d.hook_id)
        if found is not None:
            found.last_response = {
                "code": d.status_code or None,
                "status": "active" if d.status == "OK" else "failed",
                "message": d.status,
            }
        log.info(
            "webhook_delivered",
            gh_event=d.event,
            action=d.action,
            hook_id=d.hook_id,
            guid=d.guid,
            status_code=d.status_code,
            duration=d.duration,
        )

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            queues, threads = list(self._queues.values()), list(self._threads)
            self._queues.clear()
            self._threads.clear()
        for q in queues:  # drop what is still queued, then stop the sender
            while True:
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    self.busy.done()
            q.put(_STOP)
        for thread in threads:
            thread.join(timeout=self.timeout_s + 1)

    def restart(self) -> None:
        self.stop()
        with self._lock:
            self._stopped = False
