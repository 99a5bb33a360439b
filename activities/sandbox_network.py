"""The network of a sandboxed command: its own namespace, whose only way out is the egress proxy.

Every bubblewrap sandbox gets a new network namespace (`--unshare-net`: only `lo`, no route to
the host or anywhere else), whatever the policy says; the worker's network is never shared. A
command whose policy allows the network also gets, for as long as it runs, an `EgressProxy` on a
unix socket in a private directory of the worker, mounted read-only into the sandbox at
`/run/shopfloor-egress`, and is started through `sandbox_forwarder`, which serves the proxy on
the sandbox's own loopback and sets `HTTP_PROXY`, `HTTPS_PROXY` and the like for the command.
With the proxy down nothing leaves: there is no other route. Without bubblewrap there is no
namespace to confine a command to, so a command that may use the network is refused.

The allow-list is the package registries plus the repository's `network_allow` entries that the
operator's bound (`SHOPFLOOR_SANDBOX_NETWORK_ALLOW`) covers, and the operator's internal mirrors
(`SHOPFLOOR_SANDBOX_MIRRORS`: exact host:port endpoints, private or loopback ones too, never a
service of the worker's); the worker's own services come from its settings
(`SandboxNetwork.from_settings`). The sandbox's loopback is its own, and clients reach 127.0.0.1
directly rather than through a proxy, so a mirror on the worker's loopback is served by the
forwarder on the same address and port inside the sandbox, through the proxy.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import structlog

from shopfloor.activities.egress_destinations import Mirror, ProtectedHosts
from shopfloor.activities.egress_proxy import EgressProxy
from shopfloor.agents.host_patterns import PACKAGE_REGISTRIES, HostPattern, allow_list
from shopfloor.child_python import python_command
from shopfloor.errors import ToolError, UsageError
from shopfloor.models.agent_run import CommandPolicy

if TYPE_CHECKING:
    from shopfloor.settings import Settings

__all__ = ["EgressSession", "SandboxNetwork", "command_network", "network_bwrap_args", "network_command"]

log = structlog.get_logger(__name__)

SOCKET_DIR = "/run/shopfloor-egress"  # inside the sandbox
SOCKET_NAME = "proxy.sock"


@cache
def _forwarder_source() -> str:
    return (Path(__file__).parent / "sandbox_forwarder.py").read_text()


class SandboxNetwork:
    """A worker's egress rules: the operator's bound on what repositories may add to the package
    registries, and the worker's own services, which no command may reach."""

    def __init__(
        self,
        bound: Sequence[str] = (),
        services: dict[str, str] | None = None,
        defaults: Sequence[str] = PACKAGE_REGISTRIES,
        mirrors: Sequence[str] = (),
    ) -> None:
        problems = []
        for text in [*bound, *defaults]:
            try:
                HostPattern.parse(text)
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise UsageError(f"SHOPFLOOR_SANDBOX_NETWORK_ALLOW: {'; '.join(problems)}")
        parsed: list[Mirror] = []
        for text in mirrors:
            try:
                parsed.append(Mirror.parse(text))
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise UsageError(f"SHOPFLOOR_SANDBOX_MIRRORS: {'; '.join(problems)}")
        self.mirrors = frozenset(parsed)
        self.bound = tuple(bound)
        self.defaults = tuple(defaults)
        self.protected = ProtectedHosts(dict(services or {}))
        self._warned: set[tuple[str, ...]] = set()  # ignored entries the operator was told about

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxNetwork:
        services = {
            "the Temporal frontend": settings.effective_temporal_address,
            "GitHub's API": settings.github_api_url,
            "the GitHub simulator": f"{settings.simulator_host}:{settings.simulator_port}",
        }
        blob = settings.s3_endpoint_url or _blob_endpoint(settings.blob_url)
        if blob:
            services["the blob store"] = blob
        for name, url in (("OpenAI", settings.openai_base_url), ("Anthropic", settings.anthropic_base_url)):
            if url:
                services[f"the model endpoint ({name})"] = url
        return cls(settings.sandbox_network_allow, services, mirrors=settings.sandbox_mirrors)

    @asynccontextmanager
    async def session(self, policy: CommandPolicy) -> AsyncIterator[EgressSession]:
        """An egress proxy for one command, listening until the block ends."""
        allow = allow_list(policy.network_allow, self.bound, self.defaults)
        if allow.ignored and allow.ignored not in self._warned and len(self._warned) < 1000:
            self._warned.add(allow.ignored)
            log.warning(
                "repository network_allow entries outside SHOPFLOOR_SANDBOX_NETWORK_ALLOW are ignored",
                ignored=list(allow.ignored),
            )
        directory = Path(tempfile.mkdtemp(prefix="sf-egress-", dir=_short_tmp()))
        proxy = EgressProxy(allow, self.protected, mirrors=self.mirrors)
        try:
            await proxy.start(directory / SOCKET_NAME)
            yield EgressSession(directory, proxy, sorted(str(m) for m in self.mirrors if m.loopback))
        finally:
            await proxy.close()
            shutil.rmtree(directory, ignore_errors=True)


def _blob_endpoint(blob_url: str | None) -> str | None:
    """The host a remote blob store is reached at (s3://bucket/...: the bucket's AWS name)."""
    if not blob_url:
        return None
    url = urlsplit(blob_url)
    if url.scheme == "s3" and url.hostname:
        return f"{url.hostname}.s3.amazonaws.com"
    return blob_url if url.scheme in ("http", "https") else None


def _short_tmp() -> str:
    """A temporary directory short enough for a unix socket path (108 bytes at most)."""
    tmp = tempfile.gettempdir()
    return tmp if len(tmp) < 60 else "/tmp"


@dataclass
class EgressSession:
    directory: Path  # on the worker; holds the proxy's socket
    proxy: EgressProxy
    local_mirrors: list[str] = field(default_factory=list)  # served on the sandbox's loopback too

    def report(self) -> str:
        """A note for the command's output on what the proxy refused ("" when nothing was)."""
        if not self.proxy.refused:
            return ""
        lines = [f"shopfloor: the sandbox's network proxy refused {self.proxy.refused} connection(s):"]
        lines += [f"- {sentence}" for sentence in self.proxy.refusals]
        if self.proxy.refused > len(self.proxy.refusals):
            lines.append(f"- ... and {self.proxy.refused - len(self.proxy.refusals)} more")
        return "\n".join(lines)


@asynccontextmanager
async def command_network(
    mode: str, policy: CommandPolicy, network: SandboxNetwork | None
) -> AsyncIterator[EgressSession | None]:
    """The egress session of a command that may use the network (None for one that may not).
    Raises ToolError, before anything runs, for such a command without bubblewrap."""
    if not policy.network:
        yield None
        return
    if mode != "bwrap":
        raise ToolError(
            "not run: this repository lets commands use the network, and such commands run only in "
            "the bubblewrap sandbox, whose only way out is shopfloor's egress proxy; this worker runs "
            "commands without bubblewrap, so it cannot hold the command to the allowed hosts"
        )
    async with (network or SandboxNetwork()).session(policy) as session:
        yield session


def network_bwrap_args(session: EgressSession | None) -> list[str]:
    """bubblewrap's network arguments: always a namespace of its own, and the proxy's socket
    when the command may use the network. They go after the other mounts."""
    args = ["--unshare-net"]
    if session is not None:
        args += ["--ro-bind", str(session.directory), SOCKET_DIR]
    return args


def network_command(session: EgressSession | None, argv: list[str]) -> list[str]:
    """`argv`, started through the forwarder when the command may use the network."""
    if session is None:
        return argv
    local = [a for m in session.local_mirrors for a in ("--local", m)]
    return python_command(
        "-S",
        "-c",
        _forwarder_source(),
        os.path.join(SOCKET_DIR, SOCKET_NAME),
        *local,
        "--",
        *argv,
        isolated=True,  # it starts inside the sandbox, in the repository's workspace
    )
