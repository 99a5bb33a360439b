"""What a command in the sandbox can reach, asked from inside it.

`probe_command(*checks)` is a shell command (for run_command, or a scripted model's
run_command call) that runs SCRIPT with the sandbox's python; each check is `KIND=TARGET`:

- `get=URL`: urllib with the environment's proxy variables (plain http goes in absolute form);
- `tunnel=HOST:PORT`: `CONNECT HOST:PORT` sent to $HTTPS_PROXY; reached when it answers 200;
- `direct=HOST:PORT`: a TCP connection that bypasses every proxy;
- `temporal=HOST:PORT`: the attack itself: a Temporal client lists the server's workflows.

It prints one line per check, `PROBE <check> REACHED <detail>` or `PROBE <check> BLOCKED
<detail>`; `results(output)` reads them back.
"""

from __future__ import annotations

SCRIPT = r"""
import asyncio, os, socket, sys, urllib.error, urllib.parse, urllib.request

def get(url):
    try:
        return urllib.request.urlopen(url, timeout=20).read().decode(errors="replace")[:200]
    except urllib.error.HTTPError as exc:  # the proxy's refusal says why in its body
        raise OSError(f"HTTP {exc.code}: {exc.read().decode(errors='replace').strip()}") from None

def tunnel(target):
    proxy = os.environ.get("HTTPS_PROXY")
    if not proxy:
        raise OSError("no HTTPS_PROXY in the environment")
    p = urllib.parse.urlsplit(proxy)
    with socket.create_connection((p.hostname, p.port), timeout=20) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        answer = s.recv(4096).decode(errors="replace")
    status = answer.split("\r\n", 1)[0]
    if " 200 " not in status + " ":
        raise OSError(f"{status} / {answer.rpartition(chr(10) * 2)[2].strip() or answer[-300:]}")
    return status

def direct(target):
    host, _, port = target.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
        return "connected"

def temporal(target):
    from temporalio.client import Client

    async def attack():
        client = await asyncio.wait_for(Client.connect(target), 20)
        ids = []
        async for w in client.list_workflows(page_size=20):
            ids.append(w.id)
            if len(ids) >= 5:
                break
        return f"listed workflows: {ids}"

    return asyncio.run(attack())

for check in sys.argv[1:]:
    kind, _, target = check.partition("=")
    try:
        detail = {"get": get, "tunnel": tunnel, "direct": direct, "temporal": temporal}[kind](target)
        print(f"PROBE {check} REACHED {detail}", flush=True)
    except BaseException as exc:  # noqa: BLE001 - every failure is an answer here
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        print(f"PROBE {check} BLOCKED {text}", flush=True)
"""


def probe_command(*checks: str) -> str:
    args = " ".join(f"'{c}'" for c in checks)
    return f"python3 - {args} <<'PROBE'\n{SCRIPT.strip()}\nPROBE"


def results(output: str) -> dict[str, tuple[bool, str]]:
    """check -> (reached, detail), for every PROBE line in a command's output."""
    found: dict[str, tuple[bool, str]] = {}
    for line in output.splitlines():
        if line.startswith("PROBE "):
            check, verdict, detail = (line[6:].split(" ", 2) + ["", ""])[:3]
            found[check] = (verdict == "REACHED", detail)
    return found
