"""The sandbox's network allow-list (agents/host_patterns.py) and the addresses the egress proxy
refuses whatever the allow-list says (activities/egress_destinations.py)."""

from __future__ import annotations

import ipaddress

import pytest

from shopfloor.activities.egress_destinations import ProtectedHosts, address_refusal, endpoint_of
from shopfloor.agents.host_patterns import HostPattern, allow_list
from shopfloor.agents.policy import parse_policy

pytestmark = pytest.mark.fast

P = HostPattern.parse


@pytest.mark.parametrize(
    ("pattern", "host", "port", "allowed"),
    [
        ("pypi.org", "pypi.org", 443, True),
        ("pypi.org", "pypi.org", 80, True),
        ("pypi.org", "pypi.org", 22, False),  # no port named: 80 and 443 only
        ("PyPI.org.", "pypi.org", 443, True),
        ("pypi.org", "evilpypi.org", 443, False),
        ("pypi.org", "pypi.org.evil.com", 443, False),
        ("*.example.com", "a.example.com", 443, True),
        ("*.example.com", "a.b.example.com", 443, True),
        ("*.example.com", "example.com", 443, False),
        ("*.example.com", "badexample.com", 443, False),
        ("mirror.example.org:8443", "mirror.example.org", 8443, True),
        ("mirror.example.org:8443", "mirror.example.org", 443, False),
        ("203.0.113.7", "203.0.113.7", 443, True),
        ("[2001:db8::7]:443", "2001:db8::7", 443, True),
        ("*.example.com", "203.0.113.7", 443, False),
    ],
)
def test_patterns_match_hosts_and_ports(pattern, host, port, allowed):
    assert P(pattern).matches(host, port) is allowed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "not a host pattern"),
        ("two words", "not a host name"),
        ("127.1", "not a host name"),  # a number that resolves to an address, never a name
        ("2130706433", "not a host name"),
        ("*.10.0.0.1", "comes a domain name"),
        ("host:0", "port must be between"),
        ("2001:db8::1", "not a host pattern"),  # an IPv6 literal needs brackets
        ("-bad.example.com", "not a host name"),
    ],
)
def test_bad_patterns_are_refused_with_a_sentence(text, problem):
    with pytest.raises(ValueError, match=problem):
        P(text)


@pytest.mark.parametrize(
    ("bound", "entry", "covered"),
    [
        ("*.corp.example", "pkgs.corp.example", True),
        ("*.corp.example", "*.eu.corp.example", True),
        ("*.corp.example", "*.example", False),
        ("*.corp.example", "corp.example", False),
        ("*.corp.example", "pkgs.corp.example:8443", False),  # the bound allows 80 and 443 only
        ("mirror.example.org:8443", "mirror.example.org:8443", True),
        ("mirror.example.org:8443", "mirror.example.org", False),
        ("*", "anything.example.net:22", False),
        ("*:22", "anything.example.net:22", True),
        ("*", "anything.example.net", True),
    ],
)
def test_an_operator_bound_covers_only_what_it_allows(bound, entry, covered):
    assert P(bound).covers(P(entry)) is covered


def test_the_allow_list_is_the_registries_plus_covered_repository_entries():
    allow = allow_list(["pkgs.corp.example", "evil.example.com", "not a host"], ["*.corp.example"])
    assert allow.allows("pypi.org", 443) and allow.allows("registry.npmjs.org", 443)
    assert allow.allows("pkgs.corp.example", 443)
    assert not allow.allows("evil.example.com", 443)
    assert allow.ignored == ("evil.example.com", "not a host")
    assert allow.ignored_entry_for("evil.example.com", 443) == "evil.example.com"
    assert str(allow) == "the package registries and pkgs.corp.example"


def test_the_policy_key_checks_each_pattern():
    load = parse_policy('network_for_commands: true\nnetwork_allow: ["pkgs.corp.example", "*.corp.example:8443"]\n')
    assert load.ok and load.policy.network_allow == ["pkgs.corp.example", "*.corp.example:8443"]
    assert parse_policy("").policy.network_allow == []
    bad = parse_policy('network_allow: ["a b", 3]\n')
    assert bad.errors == [
        '`network_allow.0`: "a b" is not a host name or an IP address',
        "`network_allow.1`: must be text (got 3)",
    ]


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "CGNAT"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00::2", "unique local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("::7f00:1", "IPv4-compatible"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),  # IPv4-mapped
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ],
)
def test_addresses_no_command_may_reach(address, why):
    refusal = address_refusal(ipaddress.ip_address(address), {}, frozenset())
    assert refusal is not None and why in refusal


@pytest.mark.parametrize("address", ["203.0.113.80", "198.18.0.2", "151.101.0.223", "2a04:4e42::223"])
def test_public_addresses_pass(address):
    assert address_refusal(ipaddress.ip_address(address), {}, frozenset()) is None


def test_the_workers_services_and_machine_are_refused_by_address():
    temporal = ipaddress.ip_address("198.18.0.9")
    assert "the Temporal frontend" in address_refusal(temporal, {temporal: "the Temporal frontend"}, frozenset())
    own = ipaddress.ip_address("198.18.0.10")
    assert "the worker's own machine" in address_refusal(own, {}, frozenset({own}))


def test_services_are_named_by_host_and_port():
    assert endpoint_of("https://api.github.com/") == ("api.github.com", 443)
    assert endpoint_of("http://127.0.0.1:8100/api/v3") == ("127.0.0.1", 8100)
    assert endpoint_of("temporal.internal:7233") == ("temporal.internal", 7233)
    hosts = ProtectedHosts({"the Temporal frontend": "127.0.0.1:7233", "the GitHub simulator": "127.0.0.1:8100"})
    assert hosts.named("127.0.0.1", 8100) == "the GitHub simulator"
    assert hosts.named("127.0.0.1", 7233) == "the Temporal frontend"
    assert hosts.named("127.0.0.1", 9999) == "the Temporal frontend"  # the host is refused on any port
    assert hosts.named("pypi.org", 443) is None
