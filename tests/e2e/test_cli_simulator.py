"""`shopfloor simulator` as a user runs it: it prints where its API, git and webhooks are, serves
GitHub's API and git there, signs deliveries with SHOPFLOOR_WEBHOOK_SECRET, and Ctrl-C stops it."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
from agent_runs import sample_repo
from cli_runs import LongRunning, cli_env, port_open, wait_until

from shopfloor.devserver import free_port
from shopfloor.github_signature import verify

SECRET = "sim-e2e-secret"


class _Receiver(BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers.items()), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _git(*args: str, cwd: Path | None = None, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


async def test_simulator_prints_its_urls_serves_api_and_git_and_delivers_signed_webhooks(tmp_path):
    sim_port, hook_port, env_port = free_port(), free_port(), free_port()
    receiver = HTTPServer(("127.0.0.1", hook_port), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = cli_env(
        SHOPFLOOR_DATA_DIR=str(tmp_path / "data"),
        SHOPFLOOR_SIMULATOR_PORT=str(env_port),  # --port below wins over it
        SHOPFLOOR_WEBHOOK_SECRET=SECRET,
    )
    hook_url = f"http://127.0.0.1:{hook_port}/hook"
    base = f"http://127.0.0.1:{sim_port}"
    try:
        args = ["simulator", "--webhook-url", hook_url, "--host", "127.0.0.1", "--port", str(sim_port)]
        with LongRunning(args, env, tmp_path / "sim.log") as sim:
            async with httpx.AsyncClient(trust_env=False, timeout=10) as http:

                async def answers():
                    sim.check_alive()
                    try:
                        return (
                            await http.get(f"{base}/api/v3/rate_limit", headers={"Authorization": "token user:alice"})
                        ).status_code == 200
                    except httpx.TransportError:
                        return False

                await wait_until(answers, 30, "the simulator to answer")
                banner = sim.output()
                assert f"GitHub API  {base}/api/v3" in banner
                assert f"git         {base}/{{owner}}/{{repo}}.git" in banner
                assert f"webhooks -> {hook_url} (signed with SHOPFLOOR_WEBHOOK_SECRET)" in banner
                assert SECRET not in banner

                created = await http.post(
                    f"{base}/_sim/repos",
                    json={"owner": "ada", "name": "greeter", "source_dir": str(sample_repo(tmp_path / "src"))},
                )
                assert created.status_code == 201, created.text
                assert created.json()["clone_url"] == f"{base}/ada/greeter.git"

                issue = await http.post(
                    f"{base}/api/v3/repos/ada/greeter/issues",
                    headers={"Authorization": "token user:bob"},
                    json={"title": "greet() is rude", "body": "It should say hi."},
                )
                assert issue.status_code == 201, issue.text
                assert issue.json()["user"]["login"] == "bob"

                async def issue_delivered():
                    return any(h.get("X-GitHub-Event") == "issues" for h, _ in _Receiver.received)

                await wait_until(issue_delivered, 30, "the issues webhook to arrive")

            clone = _git("clone", f"{base}/ada/greeter.git", str(tmp_path / "clone"), home=tmp_path)
            assert clone.returncode == 0, clone.stderr
            assert (tmp_path / "clone" / "src" / "greet.py").read_text().startswith("def greet")

            code, _ = sim.interrupt(timeout_s=20)
            output = sim.output()
            assert code == 0, output
            assert "GitHub simulator stopped" in output and "Traceback" not in output
            assert not port_open(sim_port)
    finally:
        receiver.shutdown()

    by_event = {h["X-GitHub-Event"]: (h, body) for h, body in _Receiver.received}
    headers, body = by_event["issues"]
    assert verify(SECRET.encode(), body, headers["X-Hub-Signature-256"])
    assert json.loads(body)["action"] == "opened"
    assert headers["X-GitHub-Delivery"] and headers["X-GitHub-Hook-ID"]
