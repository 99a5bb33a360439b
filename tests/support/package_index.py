"""A PEP 503 "simple" package index on this machine's loopback, serving wheels built by hand, that
counts the wheel downloads it serves: the operator's internal mirror in setup tests."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import threading
import zipfile
from typing import Any


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(name: str, version: str, files: dict[str, str]) -> tuple[str, bytes]:
    """(file name, bytes) of a pure-Python wheel holding `files` (paths inside site-packages)."""
    dist = f"{name}-{version}.dist-info"
    contents = {
        **{path: text.encode() for path, text in files.items()},
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: shopfloor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in contents.items())
    contents[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in contents.items():
            zf.writestr(path, data)
    return f"{name}-{version}-py3-none-any.whl", buf.getvalue()


class PackageIndex:
    """`/simple/<name>/` pages linking to `/files/<wheel>`; `downloads` lists the wheels served."""

    def __init__(self, wheels: dict[str, tuple[str, bytes]]) -> None:
        self.downloads: list[str] = []
        files = {filename: data for filename, data in wheels.values()}
        pages = {
            name: "".join(
                f'<a href="/files/{filename}#sha256={hashlib.sha256(data).hexdigest()}">{filename}</a>\n'
                for filename, data in [wheels[name]]
            )
            for name in wheels
        }
        downloads = self.downloads

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                path = self.path.split("?", 1)[0]
                body: bytes | None = None
                kind = "text/html"
                if path.startswith("/simple/"):
                    name = path.removeprefix("/simple/").strip("/")
                    if name in pages:
                        body = f"<!DOCTYPE html><html><body>\n{pages[name]}</body></html>".encode()
                    elif not name:
                        body = "".join(f'<a href="/simple/{n}/">{n}</a>\n' for n in pages).encode()
                elif path.startswith("/files/") and path.removeprefix("/files/") in files:
                    body, kind = files[path.removeprefix("/files/")], "application/octet-stream"
                    downloads.append(path.removeprefix("/files/"))
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.endpoint}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
