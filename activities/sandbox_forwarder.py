"""Inside the sandbox: the command's proxy address on its own loopback, relayed to the egress proxy.

A sandbox that may use the network has its own network namespace with only `lo` in it; the
worker's egress proxy listens on a unix socket mounted into it. This script (standard library
only, run as `python -I -S -c <this file> SOCKET -- COMMAND...`) listens on 127.0.0.1 at a free
port of the sandbox's loopback, points the proxy variables of the command's environment at it,
runs the command as its child, relays every connection to the socket while it runs, and exits
as the command did (128+N when a signal N ended it). Each `--local HOST:PORT` (an operator's
mirror on the worker's loopback) is also listened on at that address inside the sandbox, whose
connections are tunnelled through the proxy (CONNECT) to it: clients reach loopback addresses
directly, never through a proxy. Nothing here decides what is allowed: the proxy outside does.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "PIP_PROXY",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "YARN_HTTP_PROXY",
    "YARN_HTTPS_PROXY",
)
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")
# The sandbox's loopback is its own (a test suite's servers live there): reached directly.
OWN_LOOPBACK = "localhost,127.0.0.1,::1"
CHUNK = 64 * 1024
MAX_RELAYS = 128  # connections at once (the proxy itself takes fewer); more are closed at once


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _relay(client: socket.socket, path: str, slots: threading.BoundedSemaphore) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
    except (OSError, RuntimeError):  # RuntimeError: no thread could be started
        pass
    finally:
        client.close()
        upstream.close()
        slots.release()


def _tunnel(client: socket.socket, path: str, target: str, slots: threading.BoundedSemaphore) -> None:
    """A local mirror's connection: CONNECT through the proxy, then relay; a refusal's answer
    goes to the client as it is (an HTTP client reads the proxy's sentence)."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        upstream.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            data = upstream.recv(CHUNK)
            if not data:
                break
            head += data
        status, _, rest = head.partition(b"\r\n\r\n")
        if not status.startswith(b"HTTP/1.1 200"):
            client.sendall(head)
            return
        if rest:
            client.sendall(rest)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
    except (OSError, RuntimeError):
        pass
    finally:
        client.close()
        upstream.close()
        slots.release()


def _serve(listener: socket.socket, path: str, target: str | None = None) -> None:
    slots = threading.BoundedSemaphore(MAX_RELAYS)
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        if not slots.acquire(blocking=False):
            client.close()
            continue
        try:
            if target is None:
                threading.Thread(target=_relay, args=(client, path, slots), daemon=True).start()
            else:
                threading.Thread(target=_tunnel, args=(client, path, target, slots), daemon=True).start()
        except RuntimeError:
            client.close()
            slots.release()


def _listen_local(target: str) -> socket.socket | None:
    """A listener at `target` (host:port, [v6]:port) on the sandbox's loopback, or None."""
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1" if host == "localhost" else host, int(port)))
        sock.listen(128)
        return sock
    except (OSError, ValueError) as exc:
        print(f"shopfloor: the mirror {target} cannot be served in the sandbox: {exc}", file=sys.stderr)
        sock.close()
        return None


def main(argv: list[str]) -> int:
    local: list[str] = []
    while len(argv) >= 2 and argv[1] == "--local" and len(argv) >= 3:
        local.append(argv[2])
        argv = [argv[0], *argv[3:]]
    if len(argv) < 3 or argv[1] != "--":
        print("shopfloor: the sandbox's network forwarder was started wrongly", file=sys.stderr)
        return 126
    path, command = argv[0], argv[2:]
    for target in local:  # before the proxy's own port is chosen: that one is any free port
        mirror = _listen_local(target)
        if mirror is not None:
            threading.Thread(target=_serve, args=(mirror, path, target), daemon=True).start()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = dict(os.environ)
    env.update({name: url for name in PROXY_VARIABLES})
    env.update({name: OWN_LOOPBACK for name in NO_PROXY_VARIABLES})
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        pid = os.posix_spawnp(command[0], command, env)
    except OSError as exc:
        print(f"shopfloor: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
