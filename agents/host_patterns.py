"""Host patterns of the sandbox's network allow-list: which hosts a command may reach.

A pattern is a host name (`pypi.org`), every name under a domain (`*.example.com`: not the
domain itself), or an IP literal (`203.0.113.7`, `[2001:db8::7]`), optionally with a port
(`mirror.example.com:8443`). Without a port it allows 80 and 443 only, the ports package
registries use. The allow-list a command gets is the built-in package registries plus the
repository policy's `network_allow`, of which only the patterns the operator's bound covers are
kept. Pure string work: what a name resolves to is checked by the egress proxy.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PORTS",
    "PACKAGE_REGISTRIES",
    "AllowList",
    "HostPattern",
    "allow_list",
    "check_pattern",
    "normalize_host",
]

DEFAULT_PORTS = (80, 443)
# Where installs fetch from: Python, JavaScript, Debian/Ubuntu, Go, Rust, Ruby, Java.
PACKAGE_REGISTRIES = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "proxy.golang.org",
    "sum.golang.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "rubygems.org",
    "index.rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
)
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_PORTED = re.compile(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>[0-9]{1,5}))?")


def normalize_host(host: str) -> str | None:
    """`host` as the allow-list compares it (lower case, no trailing dot, IPs in their short
    form), or None when it is neither a DNS name nor an IP literal."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    host = host[:-1] if host.endswith(".") else host
    labels = host.split(".")
    if not host or len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    if labels[-1].isdigit():  # 127.1, 0x7f.1...: numbers that resolve to addresses, never names
        return None
    return host


@dataclass(frozen=True)
class HostPattern:
    """One allow-list entry. `suffix` set: any name under it (`*.suffix`); `suffix` == "": any
    host at all (`*`, for an operator's bound only)."""

    host: str | None = None
    suffix: str | None = None
    port: int | None = None  # None: DEFAULT_PORTS

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        """Raises ValueError with a sentence saying what is wrong."""
        raw = text.strip()
        shown = raw if len(raw) <= 60 else raw[:60] + "…"
        m = _PORTED.fullmatch(raw)
        if not raw or m is None:
            raise ValueError(f'"{shown}" is not a host pattern (a host, *.domain or an IP, and an optional :port)')
        port = None
        if m.group("port") is not None:
            port = int(m.group("port"))
            if not 1 <= port <= 65535:
                raise ValueError(f'"{shown}": the port must be between 1 and 65535')
        host = m.group("host")
        if host == "*":
            return cls(suffix="", port=port)
        if host.startswith("*."):
            suffix = normalize_host(host[2:])
            if suffix is None or _is_ip(suffix):
                raise ValueError(f'"{shown}": after "*." comes a domain name')
            return cls(suffix=suffix, port=port)
        name = normalize_host(host)
        if name is None:
            raise ValueError(f'"{shown}" is not a host name or an IP address')
        return cls(host=name, port=port)

    def __str__(self) -> str:
        name = self.host if self.host is not None else ("*" if not self.suffix else f"*.{self.suffix}")
        if name and ":" in name:  # an IPv6 literal
            name = f"[{name}]"
        return name if self.port is None else f"{name}:{self.port}"

    def allows_port(self, port: int) -> bool:
        return port in DEFAULT_PORTS if self.port is None else port == self.port

    def matches(self, host: str, port: int) -> bool:
        """Does this pattern allow `host` (as normalize_host gives it) on `port`?"""
        if not self.allows_port(port):
            return False
        if self.host is not None:
            return host == self.host
        if self.suffix == "":
            return True
        return not _is_ip(host) and host.endswith("." + str(self.suffix))

    def covers(self, other: HostPattern) -> bool:
        """Does this pattern allow everything `other` allows (an operator's bound over a
        repository's entry)?"""
        ports = DEFAULT_PORTS if other.port is None else (other.port,)
        if not all(self.allows_port(p) for p in ports):
            return False
        if self.host is not None:
            return other.host == self.host
        if self.suffix == "":
            return True
        if other.host is not None:
            return self.matches(other.host, ports[0])
        return other.suffix == self.suffix or bool(other.suffix) and str(other.suffix).endswith("." + str(self.suffix))


def check_pattern(text: str) -> str:
    """`text` when it is a valid pattern (for pydantic validators); else ValueError."""
    HostPattern.parse(text)
    return text


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class AllowList:
    """What one command may reach, and the repository's entries the operator's bound left out."""

    patterns: tuple[HostPattern, ...]
    ignored: tuple[str, ...] = ()  # the repository's entries outside the operator's bound
    added: tuple[str, ...] = ()  # the repository's entries kept (the rest are the defaults)

    def allows(self, host: str, port: int) -> bool:
        return any(p.matches(host, port) for p in self.patterns)

    def ignored_entry_for(self, host: str, port: int) -> str | None:
        """The repository entry that named this destination but was left out, if one did."""
        for text in self.ignored:
            try:
                if HostPattern.parse(text).matches(host, port):
                    return text
            except ValueError:
                continue
        return None

    def __str__(self) -> str:
        return "the package registries" + (f" and {', '.join(self.added)}" if self.added else "")


def allow_list(
    requested: Iterable[str], bound: Iterable[str], defaults: Iterable[str] = PACKAGE_REGISTRIES
) -> AllowList:
    """The defaults plus each of the repository's `requested` patterns that some pattern of the
    operator's `bound` covers. Unparsable bound entries cover nothing (settings are checked at
    start-up); unparsable or uncovered requests are left out and listed in `ignored`."""
    limits = []
    for text in bound:
        try:
            limits.append(HostPattern.parse(text))
        except ValueError:
            continue
    patterns = [HostPattern.parse(text) for text in defaults]
    ignored, added = [], []
    for text in requested:
        try:
            wanted = HostPattern.parse(text)
        except ValueError:
            ignored.append(text)
            continue
        if any(limit.covers(wanted) for limit in limits):
            patterns.append(wanted)
            added.append(str(wanted))
        else:
            ignored.append(text)
    return AllowList(tuple(dict.fromkeys(patterns)), tuple(dict.fromkeys(ignored)), tuple(dict.fromkeys(added)))
