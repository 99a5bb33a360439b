"""The GitHub simulator in tests: `create_app` served by uvicorn on a free port in a thread.

    with running_simulator(tmp_path / "sim") as sim:
        sim.create_repo("alice", "demo", source_dir=src, ci_command="python -m pytest -q")
        gh = sim.api("alice")            # an httpx client acting as user alice
        ...
        sim.wait_idle()                  # every webhook delivered and CI run finished

Humans act through the normal API with `token user:<login>`; `api()` with no login acts as the
installed bot (`shopfloor[bot]`) with the token "test-bot-token".
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from threaded_server import serving

from shopfloor.devserver import free_port
from shopfloor.simulator.app import create_app
from shopfloor.simulator.config import SimulatorConfig

# The bot's personal token on the test simulator (its `bot_tokens`); any other token is a 401.
BOT_TOKEN = "test-bot-token"


def app_keys() -> tuple[str, str]:
    """A GitHub App's RSA key pair as PEM: (private, for shopfloor's settings; public, for the
    simulator's `app_public_keys`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    private = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


__all__ = ["BOT_TOKEN", "SimulatorHandle", "app_keys", "computed_pull", "running_simulator", "user_token"]


def computed_pull(client: httpx.Client, path: str, tries: int = 20) -> dict[str, Any]:
    """A pull request once GitHub's background job has computed `mergeable` (the first read
    after its head or base moved answers null), read as a careful client does."""
    for _ in range(tries):
        got = client.get(path)
        assert got.status_code == 200, got.text
        if got.json()["mergeable"] is not None or got.json()["state"] != "open":
            return got.json()
        time.sleep(0.05)
    raise AssertionError(f"{path}: mergeable was still null after {tries} reads")


def user_token(login: str) -> str:
    """The token that makes the simulator act as the human `login`."""
    return f"user:{login}"


@dataclass
class SimulatorHandle:
    base_url: str
    api_url: str
    data_dir: Path
    _clients: list[httpx.Client] = field(default_factory=list, repr=False)

    def _control(self) -> httpx.Client:
        client = httpx.Client(base_url=self.base_url, timeout=120)
        self._clients.append(client)
        return client

    def _check(self, resp: httpx.Response, what: str) -> httpx.Response:
        if resp.is_error:
            raise AssertionError(f"simulator: {what} failed with {resp.status_code}: {resp.text}")
        return resp

    def git_url(self, owner: str, repo: str, token: str | None = None) -> str:
        if token is None:
            return f"{self.base_url}/{owner}/{repo}.git"
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://x-access-token:{quote(token, safe='')}@{parts.netloc}/{owner}/{repo}.git"

    def create_repo(
        self,
        owner: str,
        name: str,
        *,
        source_dir: Path | None = None,
        ci_command: str | None = None,
        default_branch: str = "main",
        private: bool = False,
        ci_on_default_branch: bool = False,
    ) -> dict[str, Any]:
        body = {
            "owner": owner,
            "name": name,
            "default_branch": default_branch,
            "ci_command": ci_command,
            "ci_on_default_branch": ci_on_default_branch,
            "private": private,
            "source_dir": str(source_dir) if source_dir is not None else None,
        }
        with httpx.Client(base_url=self.base_url, timeout=120) as c:
            return self._check(c.post("/_sim/repos", json=body), f"creating {owner}/{name}").json()

    def set_permission(self, owner: str, repo: str, login: str, permission: str) -> None:
        with self.api(owner) as c:
            self._check(
                c.put(f"/repos/{owner}/{repo}/collaborators/{login}", json={"permission": permission}),
                f"giving {login} {permission} on {owner}/{repo}",
            )

    def inject_fault(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        retry_after: int | None = None,
        times: int = 1,
        when: str = "before",
        message: str | None = None,
    ) -> None:
        body = {
            "method": method.upper(),
            "path_regex": path_regex,
            "status": status,
            "retry_after": retry_after,
            "times": times,
            "when": when,
            "message": message,
        }
        with httpx.Client(base_url=self.base_url, timeout=30) as c:
            self._check(c.post("/_sim/faults", json=body), "injecting a fault")

    def clear_faults(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=30) as c:
            self._check(c.delete("/_sim/faults"), "clearing faults")

    def deliveries(self) -> list[dict[str, Any]]:
        with httpx.Client(base_url=self.base_url, timeout=30) as c:
            return self._check(c.get("/_sim/deliveries"), "listing deliveries").json()

    def attach(self, data: bytes, content_type: str = "image/png", redirect: str | None = None) -> str:
        """Upload a file as people attach a screenshot to an issue; its GitHub-like address."""
        body = {"content_base64": base64.b64encode(data).decode(), "content_type": content_type, "redirect": redirect}
        with httpx.Client(base_url=self.base_url, timeout=30) as c:
            return self._check(c.post("/_sim/attachments", json=body), "uploading an attachment").json()["url"]

    def requests(self) -> list[dict[str, Any]]:
        with httpx.Client(base_url=self.base_url, timeout=30) as c:
            return self._check(c.get("/_sim/requests"), "listing requests").json()

    def wait_idle(self, timeout: float = 60) -> None:
        with httpx.Client(base_url=self.base_url, timeout=timeout + 10) as c:
            self._check(c.post("/_sim/wait-idle", params={"timeout": timeout}), "waiting for idle")

    def api(self, login: str | None = None) -> httpx.Client:
        """An httpx client on the REST API as `login` (None: the bot). Close it, or use `with`."""
        token = BOT_TOKEN if login is None else user_token(login)
        client = httpx.Client(
            base_url=self.api_url,
            timeout=120,
            headers={"Authorization": f"token {token}", "Accept": "application/vnd.github+json"},
        )
        self._clients.append(client)
        return client

    def reset(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=120) as c:
            self._check(c.post("/_sim/reset"), "resetting")

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()


@contextmanager
def running_simulator(data_dir: Path, **config_overrides: Any) -> Iterator[SimulatorHandle]:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = SimulatorConfig(
        **{"base_url": base_url, "data_dir": Path(data_dir), "bot_tokens": [BOT_TOKEN], **config_overrides}
    )
    with serving(create_app(config), name="simulator", port=port):
        handle = SimulatorHandle(base_url=base_url, api_url=base_url + "/api/v3", data_dir=Path(data_dir))
        try:
            yield handle
        finally:
            handle.close()
