"""Inside the sandbox: the command's proxy address on its own loopback, relayed to the egress proxy.

A sandbox that may use the network has its own network namespace with only `lo` in it; the
worker's egress proxy listens on a unix socket mounted into it. This script (standard library
only, run as `python -I -S -c <this file> SOCKET -- COMMAND...`) listens on 127.0.0.1 at a free
port of the sandbox's loopback, points the proxy variables of the command's environment at it,
runs the command as its child, relays every connection to the socket while it runs, and exits
as the command did (128+N when a signal N ended it). Nothing here decides what is allowed: the
proxy outside does.
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


def _serve(listener: socket.socket, path: str) -> None:
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
            threading.Thread(target=_relay, args=(client, path, slots), daemon=True).start()
        except RuntimeError:
            client.close()
            slots.release()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("shopfloor: the sandbox's network forwarder was started wrongly", file=sys.stderr)
        return 126
    path, command = argv[0], argv[2:]
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
