"""configure_logging: JSON lines, secret redaction, Temporal ids, stdlib routing, idempotence."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from shopfloor.errors import UsageError
from shopfloor.logs import REDACTED, configure_logging, is_secret_key

pytestmark = pytest.mark.fast

SECRET = "sk-live-5f3c9a7e1d"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    # configure_logging changes process-wide state; put it back for other test modules.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for h in root.handlers[:]:
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    structlog.reset_defaults()


def json_lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_json_output_has_message_and_fields(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="INFO", json=True)
    structlog.get_logger("shopfloor.test").info("model step done", step=7, model="openai:gpt")

    (event,) = json_lines(capsys.readouterr().err)
    assert event["event"] == "model step done"
    assert event["step"] == 7
    assert event["model"] == "openai:gpt"
    assert event["level"] == "info"
    assert event["logger"] == "shopfloor.test"
    assert "timestamp" in event


def test_level_filters_lower_levels(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="warning", json=True)
    log = structlog.get_logger("shopfloor.test")
    log.info("hidden")
    logging.getLogger("temporalio").info("hidden too")
    log.warning("shown")

    assert [e["event"] for e in json_lines(capsys.readouterr().err)] == ["shown"]


def test_unknown_level_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="log level"):
        configure_logging(level="LOUD")


def test_secret_values_are_scrubbed_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, secrets=[SECRET, ""])
    structlog.get_logger().info(
        f"calling provider with {SECRET}",
        url=f"https://api.example/?key={SECRET}",
        nested={"args": [f"--key={SECRET}", "ok"]},
        blob=SECRET.encode(),
    )
    logging.getLogger("httpx").warning("header was %s", SECRET)

    err = capsys.readouterr().err
    assert SECRET not in err
    first, second = json_lines(err)
    assert first["event"] == f"calling provider with {REDACTED}"
    assert first["url"] == f"https://api.example/?key={REDACTED}"
    assert first["nested"] == {"args": [f"--key={REDACTED}", "ok"]}
    assert REDACTED in first["blob"]
    assert second["event"] == f"header was {REDACTED}"


def test_secrets_in_tracebacks_are_scrubbed(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True, secrets=[SECRET])
    try:
        raise RuntimeError(f"401 for key {SECRET}")
    except RuntimeError:
        structlog.get_logger().exception("provider failed")

    err = capsys.readouterr().err
    assert SECRET not in err
    (event,) = json_lines(err)
    assert "RuntimeError: 401 for key [redacted]" in event["exception"]


def test_secret_named_keys_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    structlog.get_logger().info(
        "request",
        api_key="abc",
        github_token="ghp_x",
        password="hunter2",
        headers={"Authorization": "Bearer y", "Set-Cookie": "s=1", "Accept": "json"},
        input_tokens=1200,
        max_tokens=4096,
    )
    logging.getLogger("uvicorn.error").info("hook", extra={"webhook_secret": "w", "delivery": "d1"})

    first, second = json_lines(capsys.readouterr().err)
    assert first["api_key"] == first["github_token"] == first["password"] == REDACTED
    assert first["headers"] == {"Authorization": REDACTED, "Set-Cookie": REDACTED, "Accept": "json"}
    # Counters that merely mention tokens stay readable.
    assert first["input_tokens"] == 1200
    assert first["max_tokens"] == 4096
    assert second["webhook_secret"] == REDACTED
    assert second["delivery"] == "d1"


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("X-Api-Key", True),
        ("OPENAI_API_KEY", True),
        ("token", True),
        ("access_token", True),
        ("password", True),
        ("Authorization", True),
        ("cookie", True),
        ("client_secret", True),
        ("private_key", True),
        ("input_tokens", False),
        ("token_count", False),
        ("key", False),
        ("blob_key", False),
        ("digest", False),
        ("workflow_id", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_stdlib_record_with_temporal_activity_extra(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    details = {
        "activity_id": "3",
        "activity_type": "model_step",
        "attempt": 2,
        "namespace": "default",
        "task_queue": "shopfloor",
        "workflow_id": "issue/acme/app/7",
        "workflow_run_id": "run-1",
        "workflow_type": "AgentWorkflow",
    }
    logging.getLogger("temporalio.activity").info("retrying model call", extra={"temporal_activity": details})

    (event,) = json_lines(capsys.readouterr().err)
    assert event["event"] == "retrying model call"
    assert event["logger"] == "temporalio.activity"
    assert event["activity_id"] == "3"
    assert event["activity_type"] == "model_step"
    assert event["workflow_id"] == "issue/acme/app/7"
    assert event["run_id"] == "run-1"
    assert event["attempt"] == 2
    assert "temporal_activity" not in event  # flattened, not nested


def test_stdlib_record_with_temporal_workflow_extra(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    details = {"workflow_id": "wf-1", "run_id": "r-9", "workflow_type": "IssueWorkflow", "attempt": 1}
    logging.getLogger("temporalio.workflow").warning(f"stage done ({details})", extra={"temporal_workflow": details})

    (event,) = json_lines(capsys.readouterr().err)
    # The adapter's "(…)" suffix is dropped: the same ids are keys now.
    assert event["event"] == "stage done"
    assert (event["workflow_id"], event["run_id"], event["workflow_type"]) == ("wf-1", "r-9", "IssueWorkflow")


async def test_real_temporal_activity_logger(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)

    @activity.defn(name="grep")
    async def grep() -> None:
        activity.logger.info("searching")

    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, activity_id="7", activity_type="grep", workflow_id="issue/acme/app/7")
    await env.run(grep)

    (event,) = json_lines(capsys.readouterr().err)
    assert event["event"] == "searching"  # without the SDK's "({...})" suffix
    assert (event["activity_id"], event["activity_type"]) == ("7", "grep")
    assert event["workflow_id"] == "issue/acme/app/7"
    assert event["attempt"] == 1


def test_configure_twice_logs_each_call_once(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=True)
    configure_logging(json=True)
    structlog.get_logger().info("once")
    logging.getLogger("temporalio").info("once too")

    events = [e["event"] for e in json_lines(capsys.readouterr().err)]
    assert events == ["once", "once too"]
    assert [h.get_name() for h in logging.getLogger().handlers].count("shopfloor") == 1


def test_reconfigure_takes_new_secrets_and_format(capsys: pytest.CaptureFixture[str]) -> None:
    log = structlog.get_logger("shopfloor.test")
    configure_logging(json=True)
    configure_logging(json=False, secrets=[SECRET])
    log.info("console line", value=SECRET)

    err = capsys.readouterr().err
    assert SECRET not in err
    assert "console line" in err and "value=[redacted]" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err.splitlines()[0])


def test_json_is_the_default_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging()  # pytest's captured stderr is not a TTY
    structlog.get_logger().info("auto", n=1)

    (event,) = json_lines(capsys.readouterr().err)
    assert (event["event"], event["n"]) == ("auto", 1)
