"""Where the sandbox's egress proxy may connect: every address a name resolves to is checked.

A destination is refused when its name is not on the command's allow-list, when it is the name of
one of the worker's own services (the Temporal frontend, the blob store, GitHub's API, the
simulator, model endpoints), or when **any** address it resolves to is loopback, link-local
(cloud metadata at 169.254.169.254), private (RFC 1918, CGNAT 100.64/10, ULA fc00::/7),
multicast, unspecified or reserved, one of this machine's own interface addresses, or an address
of those services. IPv4 addresses embedded in IPv6 ones (mapped, NAT64, 6to4) are checked as the
IPv4 address they reach. The operator's mirrors (`Mirror`, SHOPFLOOR_SANDBOX_MIRRORS) are the one
exception: an exact host:port the operator listed may be private or loopback, but never the
endpoint of one of those services, and only on the listed port. The proxy then connects to the addresses checked here and never
resolves the name again, so a DNS answer that changes in between (rebinding) cannot slip past.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import structlog

from shopfloor.agents.host_patterns import AllowList, normalize_host

__all__ = [
    "Destination",
    "Mirror",
    "ProtectedHosts",
    "Refused",
    "address_refusal",
    "check_destination",
    "endpoint_of",
    "local_addresses",
]

log = structlog.get_logger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
RESOLVE_TIMEOUT_S = 10.0
PROTECTED_TTL_S = 60.0  # the worker's services move rarely; their addresses are looked up again after this

_DENIED: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "an unspecified address"),
    ("127.0.0.0/8", "a loopback address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("100.64.0.0/10", "a shared (CGNAT) address"),
    ("169.254.0.0/16", "a link-local address (cloud metadata lives there)"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "an IPv4-compatible address (deprecated; tunnels may carry it)"),
    ("fc00::/7", "a private (unique local) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
    ("2001::/32", "a Teredo address"),
)
DENIED_NETWORKS = tuple((ipaddress.ip_network(net), why) for net, why in _DENIED)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


@dataclass(frozen=True)
class Mirror:
    """An operator's internal package mirror: one exact endpoint."""

    host: str  # normalized
    port: int

    @classmethod
    def parse(cls, text: str) -> Mirror:
        """Raises ValueError with a sentence saying what is wrong."""
        shown = text.strip()[:80]
        found = endpoint_of(text) if "//" not in text else None
        if found is None or found[1] is None or "*" in text:
            raise ValueError(f'"{shown}" is not a mirror endpoint: write an exact host:port (no scheme, no wildcard)')
        host, port = found[0], found[1]
        if not 1 <= port <= 65535:
            raise ValueError(f'"{shown}": the port must be between 1 and 65535')
        return cls(host, port)

    @property
    def loopback(self) -> bool:
        """Whether it lives on the worker's loopback (the sandbox has a loopback of its own)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class Refused(Exception):
    """A destination the proxy will not connect to; the message is a sentence for the command's
    output and the worker's log."""


@dataclass(frozen=True)
class Destination:
    host: str  # normalized
    port: int
    addresses: tuple[IPAddress, ...]  # checked: connect to these, never to a new lookup of `host`


def embedded_ipv4(addr: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, 6to4), if any."""
    if isinstance(addr, ipaddress.IPv4Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if any(addr in net for net in _NAT64):
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def address_refusal(addr: IPAddress, protected: dict[IPAddress, str], local: frozenset[IPAddress]) -> str | None:
    """Why a command may not connect to `addr` (None: it may)."""
    for candidate in (addr, embedded_ipv4(addr)):
        if candidate is None:
            continue
        for net, why in DENIED_NETWORKS:
            if candidate.version == net.version and candidate in net:
                return f"{why} ({candidate})"
        if candidate in protected:
            return f"the address of {protected[candidate]} ({candidate})"
        if candidate in local:
            return f"an address of the worker's own machine ({candidate})"
    return None


def local_addresses() -> frozenset[IPAddress]:
    """This machine's own interface addresses (a service bound to 0.0.0.0 answers on them)."""
    found: set[IPAddress] = set()
    try:  # IPv4: the LOCAL entries of the routing trie
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in zip(lines, lines[1:]):
            if line.strip() == "/32 host LOCAL":
                found.add(ipaddress.ip_address(before.strip().lstrip("|-+ ").strip()))
    except (OSError, ValueError):
        pass
    try:  # IPv6: one address per line, 32 hex digits first
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            hexa = line.split()[0]
            found.add(ipaddress.IPv6Address(int(hexa, 16)))
    except (OSError, ValueError, IndexError):
        pass
    return frozenset(found)


def endpoint_of(address: str) -> tuple[str, int | None] | None:
    """(host, port) of a URL (`https://api.github.com/...`: 443) or a `host:port` address."""
    text = address.strip()
    parts = urlsplit(text if "//" in text else f"//{text}")
    host = normalize_host(parts.hostname or "") if parts.hostname else None
    if host is None:
        return None
    try:
        port = parts.port
    except ValueError:
        port = None
    return host, port or {"http": 80, "https": 443}.get(parts.scheme)


class ProtectedHosts:
    """The worker's own services (`what` -> URL or host:port). Their names are refused outright,
    and their addresses, looked up again at most every PROTECTED_TTL_S, whatever name leads there."""

    def __init__(self, services: dict[str, str] | None = None) -> None:
        self.services = dict(services or {})
        self._endpoints = [(e, what) for what, url in self.services.items() if (e := endpoint_of(url)) is not None]
        self._addresses: dict[IPAddress, str] = {}
        self._endpoint_addresses: dict[tuple[IPAddress, int | None], str] = {}  # None: any port
        self._local: frozenset[IPAddress] = frozenset()
        self._looked_up = float("-inf")
        self._lock: asyncio.Lock | None = None

    def named(self, host: str, port: int) -> str | None:
        """The service `host` names (the one on `port` first, when one host has several)."""
        found = [(p, what) for (h, p), what in self._endpoints if h == host]
        return next((what for p, what in found if p == port), found[0][1] if found else None)

    async def addresses(self) -> tuple[dict[IPAddress, str], frozenset[IPAddress]]:
        """(service addresses, this machine's addresses), fresh within PROTECTED_TTL_S."""
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if time.monotonic() - self._looked_up > PROTECTED_TTL_S:
                looked_up = await asyncio.gather(*(_resolve_quietly(h) for (h, _), _ in self._endpoints))
                found: dict[IPAddress, str] = {}
                ported: dict[tuple[IPAddress, int | None], str] = {}
                for ((_, port), what), addresses in zip(self._endpoints, looked_up):
                    for addr in addresses:
                        found.setdefault(addr, what)
                        ported.setdefault((addr, port), what)
                self._addresses, self._local = found, await asyncio.to_thread(local_addresses)
                self._endpoint_addresses = ported
                self._looked_up = time.monotonic()
        return self._addresses, self._local

    def service_at(self, host: str, port: int) -> str | None:
        """The service listening at exactly `host`:`port`, by name (a service named without a port
        counts on every port)."""
        return next((what for (h, p), what in self._endpoints if h == host and p in (port, None)), None)

    async def service_address(self, addr: IPAddress, port: int) -> str | None:
        """The service at exactly `addr`:`port` (IPv4 inside IPv6 checked as itself), if any."""
        await self.addresses()
        for candidate in (addr, embedded_ipv4(addr)):
            if candidate is None:
                continue
            for key in ((candidate, port), (candidate, None)):
                if key in self._endpoint_addresses:
                    return self._endpoint_addresses[key]
        return None


async def _resolve_quietly(host: str) -> list[IPAddress]:
    try:
        return await resolve(host, 443)
    except Refused as exc:  # a service that cannot be looked up now is still refused by name
        log.info("egress proxy could not look up a protected service", host=host, error=str(exc))
        return []


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (an IP literal: itself). Raises Refused."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP), RESOLVE_TIMEOUT_S
        )
    except TimeoutError:
        raise Refused(f"{host} could not be resolved within {RESOLVE_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise Refused(f"{host} could not be resolved ({exc.strerror or exc})") from None
    # The socket address of a TCP result starts with the host as text (typeshed allows an int for
    # families getaddrinfo does not give here).
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise Refused(f"{host} has no addresses")
    return list(dict.fromkeys(addresses))


async def check_destination(
    host: str, port: int, allow: AllowList, protected: ProtectedHosts, mirrors: frozenset[Mirror] = frozenset()
) -> Destination:
    """The checked addresses to connect to for `host`:`port`, or Refused saying why not."""
    name = normalize_host(host)
    if name is None:
        raise Refused(f"{host[:100]!r} is not a host name or an IP address")
    if not 1 <= port <= 65535:
        raise Refused(f"port {port} is not a port")
    where = f"{name}:{port}"
    if Mirror(name, port) in mirrors:
        return await _check_mirror(name, port, protected)
    service = protected.named(name, port)
    if service is not None:
        raise Refused(f"{where} is {service}, which commands may never reach")
    if not allow.allows(name, port):
        left_out = allow.ignored_entry_for(name, port)
        if left_out is not None:
            raise Refused(
                f"{where} is named in the repository's network_allow ({left_out}), but the worker's "
                "operator does not allow it (SHOPFLOOR_SANDBOX_NETWORK_ALLOW)"
            )
        raise Refused(f"{where} is not on this command's network allow-list ({allow})")
    services, local = await protected.addresses()
    addresses = await resolve(name, port)
    for addr in addresses:
        why = address_refusal(addr, services, local)
        if why is not None:
            raise Refused(f"{where} resolves to {why}, which commands may never reach")
    return Destination(name, port, tuple(addresses))


async def _check_mirror(name: str, port: int, protected: ProtectedHosts) -> Destination:
    """An operator's mirror: any address, but never one of the worker's services on that port."""
    where = f"{name}:{port}"
    service = protected.service_at(name, port)
    if service is not None:
        raise Refused(f"{where} is listed as a mirror, but it is {service}, which commands may never reach")
    addresses = await resolve(name, port)
    for addr in addresses:
        service = await protected.service_address(addr, port)
        if service is not None:
            raise Refused(
                f"{where} is listed as a mirror, but it reaches {service} ({addr}), which commands may never reach"
            )
    return Destination(name, port, tuple(addresses))
