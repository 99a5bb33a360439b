"""The `fast` tier's rule is enforced: a test marked fast that asks for a server fixture, starts a
process (even one whose refusal it swallows) or binds a socket fails with a sentence that says why,
while an honest fast test and an unmarked test that spawns both pass.

The suite's real conftest runs a small inner suite in this process (pytester), so the hooks that
guard the tier are the ones tested. Not fast itself: the unmarked inner test starts a process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

INNER_TESTS = """
import asyncio
import socket
import subprocess

import pytest


@pytest.mark.fast
def test_asks_for_a_server(temporal_server):
    raise AssertionError("the server fixture must not even start")


@pytest.mark.fast
def test_asks_for_settings(settings):
    raise AssertionError("settings hang off the server and must not start it")


@pytest.mark.fast
def test_starts_a_process():
    subprocess.run(["true"], check=True)


@pytest.mark.fast
def test_swallows_the_refusal():
    try:
        subprocess.run(["true"], check=True)
    except Exception:
        pass


@pytest.mark.fast
async def test_starts_an_asyncio_process():
    process = await asyncio.create_subprocess_exec("true")
    await process.wait()


@pytest.mark.fast
def test_binds_a_socket():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


@pytest.fixture
def spawning_fixture():
    subprocess.run(["true"], check=True)


@pytest.mark.fast
def test_uses_a_spawning_fixture(spawning_fixture):
    pass


@pytest.mark.fast
def test_pure():
    assert sum([1, 2]) == 3


def test_unmarked_may_start_a_process():
    subprocess.run(["true"], check=True)
"""


# (test name, phase) -> (outcome, what pytest reported)
Reports = dict[tuple[str, str], tuple[str, str]]


@pytest.fixture
def inner(pytester: pytest.Pytester) -> Reports:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini(
        """
        [pytest]
        addopts = --strict-markers -p no:cacheprovider
        markers =
            fast: pure test
        asyncio_mode = auto
        asyncio_default_fixture_loop_scope = session
        asyncio_default_test_loop_scope = session
        """
    )
    pytester.makepyfile(test_inner=INNER_TESTS)
    recorder = pytester.inline_run()
    return {
        (report.nodeid.split("::")[-1], report.when): (report.outcome, report.longreprtext)
        for report in recorder.getreports("pytest_runtest_logreport")
    }


def test_fast_tests_that_ask_for_a_server_fail_before_it_starts(inner: Reports) -> None:
    for name, fixture in (("test_asks_for_a_server", "temporal_server"), ("test_asks_for_settings", "settings")):
        outcome, text = inner[name, "setup"]
        assert outcome == "failed"
        assert f"is marked fast but asks for {fixture}" in text
        assert "which start a server; remove its fast marker" in text
        # Failed before the fixtures ran, so the test body (and the server) never started.
        assert (name, "call") not in inner


def test_fast_tests_that_start_a_process_or_bind_a_socket_fail(inner: Reports) -> None:
    for name, phase, what in (
        ("test_starts_a_process", "call", "started a subprocess"),
        ("test_starts_an_asyncio_process", "call", "started a subprocess"),
        ("test_binds_a_socket", "call", "bound a socket"),
        ("test_uses_a_spawning_fixture", "setup", "started a subprocess"),
    ):
        outcome, text = inner[name, phase]
        assert outcome == "failed", name
        assert f"{name} is marked fast but {what}" in text
        # Reported once: the teardown does not repeat a refusal that already failed the test.
        assert inner[name, "teardown"] == ("passed", "")


def test_a_swallowed_refusal_still_fails_the_test(inner: Reports) -> None:
    assert inner["test_swallows_the_refusal", "call"][0] == "passed"
    outcome, text = inner["test_swallows_the_refusal", "teardown"]
    assert outcome == "failed"
    assert "is marked fast but started a subprocess" in text


def test_honest_fast_tests_and_unmarked_tests_pass(inner: Reports) -> None:
    for name in ("test_pure", "test_unmarked_may_start_a_process"):
        assert [inner[name, phase][0] for phase in ("setup", "call", "teardown")] == ["passed"] * 3


def test_an_unregistered_marker_is_an_error(pytester: pytest.Pytester) -> None:
    """--strict-markers: a typo (`fsat`) is a collection error, not a test that leaves the tier."""
    pytester.makeini(
        """
        [pytest]
        addopts = --strict-markers -p no:cacheprovider
        markers =
            fast: pure test
        asyncio_default_fixture_loop_scope = session
        """
    )
    pytester.makepyfile(test_typo="import pytest\n\n@pytest.mark.fsat\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(errors=1)
    assert "'fsat' not found in `markers` configuration option" in result.stdout.str()
