"""Failed model calls become ModelCallError with the right retry decision and a clear message,
for both providers, over real HTTP; plus the registry's credential checks."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import openai
import pytest

from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider
from shopfloor.activities.providers.base import ModelProvider
from shopfloor.activities.providers.errors import parse_retry_after, to_model_call_error
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider
from shopfloor.activities.providers.registry import check_credentials, open_provider
from shopfloor.errors import ModelCallError
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.transcript import Message, ModelRequest
from shopfloor.testing import FakeModelServer, ScriptTurn

try:  # the HTTP library the installed SDKs are built on
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

REQUEST = ModelRequest(model="x", system="s", messages=[Message(role="user", content="hi")])
APIS = ["openai", "anthropic"]


def make(api: str, base_url: str, timeout_s: float = 30) -> ModelProvider:
    if api == "openai":
        return OpenAIChatProvider("fake-model", "sk-test", base_url + "/v1", timeout_s=timeout_s)
    return AnthropicMessagesProvider("fake-model", "sk-test", base_url, timeout_s=timeout_s)


async def call_failing(api: str, server: FakeModelServer, **kw: float) -> ModelCallError:
    provider = make(api, server.url, **kw)
    try:
        with pytest.raises(ModelCallError) as info:
            await provider.complete(REQUEST)
    finally:
        await provider.aclose()
    return info.value


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer([ScriptTurn(content="recovered")]) as srv:
        yield srv


@pytest.mark.parametrize("api", APIS)
async def test_429_with_retry_after_is_retryable_and_waits(api: str, server: FakeModelServer) -> None:
    server.fail_next(429, retry_after=7)
    error = await call_failing(api, server)
    assert (error.retryable, error.status, error.retry_after) == (True, 429, 7.0)
    assert "429" in str(error) and "rate limit" in str(error).lower()
    # The fault was one-shot: the next attempt (Temporal's retry) succeeds.
    provider = make(api, server.url)
    assert (await provider.complete(REQUEST)).message.content == "recovered"
    await provider.aclose()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [500, 503, 529, 408, 409])
async def test_server_side_failures_are_retryable(api: str, status: int, server: FakeModelServer) -> None:
    server.fail_next(status)
    error = await call_failing(api, server)
    assert error.retryable and error.status == status
    assert error.retry_after is None  # none given: Temporal's backoff decides
    assert str(error).startswith(f"{api}:fake-model: {status}")


@pytest.mark.parametrize(("api", "key_env"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
async def test_401_is_final_and_names_the_key_variable(api: str, key_env: str, server: FakeModelServer) -> None:
    server.fail_next(401)
    error = await call_failing(api, server)
    assert not error.retryable and error.status == 401
    assert f"401 Unauthorized: invalid API key (check {key_env})" in str(error)
    assert "Incorrect API key provided" in str(error)  # the provider's own words


@pytest.mark.parametrize("api", APIS)
async def test_404_says_which_model_was_missing_where(api: str, server: FakeModelServer) -> None:
    server.fail_next(404)
    error = await call_failing(api, server)
    assert not error.retryable and error.status == 404
    assert "404 Not Found: model 'fake-model' not found at" in str(error)
    assert server.url in str(error)
    assert "does not exist" in str(error)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [400, 403, 422])
async def test_client_errors_are_final_with_the_provider_message(
    api: str, status: int, server: FakeModelServer
) -> None:
    server.fail_next(status, body={"message": "prompt is too long: 300000 tokens > 200000 maximum"})
    error = await call_failing(api, server)
    assert not error.retryable and error.status == status and error.retry_after is None
    assert "prompt is too long: 300000 tokens" in str(error)


async def test_custom_error_body_is_sent_verbatim(server: FakeModelServer) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded right now"}}
    server.fail_next(529, body=body, retry_after=2.5)
    error = await call_failing("anthropic", server)
    assert error.retryable and error.retry_after == 2.5 and "Overloaded right now" in str(error)


@pytest.mark.parametrize("api", APIS)
async def test_connection_refused_is_retryable(api: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = make(api, f"http://127.0.0.1:{port}")
    with pytest.raises(ModelCallError) as info:
        await provider.complete(REQUEST)
    await provider.aclose()
    assert info.value.retryable and info.value.status is None
    assert f"connection to http://127.0.0.1:{port}" in str(info.value)


@pytest.mark.parametrize("api", APIS)
async def test_timeout_is_retryable_and_not_counted_as_delivered(api: str, server: FakeModelServer) -> None:
    server.latency_s = 2.0
    error = await call_failing(api, server, timeout_s=0.3)
    assert error.retryable and "timed out" in str(error)
    [logged] = server.requests
    assert not logged.completed  # the client hung up before the answer was written


@pytest.mark.parametrize("api", APIS)
async def test_cut_off_response_is_retryable(api: str, server: FakeModelServer) -> None:
    server.truncate_next()
    error = await call_failing(api, server)
    assert error.retryable and "failed" in str(error)
    assert not server.requests[0].completed


def _status_error(status: int, headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(status, headers=headers, request=request)
    return openai.APIStatusError("boom", response=response, body={"message": "slow down"})


@pytest.mark.fast
def test_retry_after_forms() -> None:
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert parse_retry_after(httpx.Headers({"retry-after": "12"})) == 12.0
    now = datetime(2030, 1, 1, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(httpx.Headers({"retry-after": date}), now=now.timestamp()) == 30.0
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None
    # A date in the past means "now", never a negative wait.
    assert parse_retry_after(httpx.Headers({"retry-after": date}), now=now.timestamp() + 60) == 0.0


@pytest.mark.fast
def test_mapping_honours_retry_after_ms_and_unknown_errors_are_final() -> None:
    error = to_model_call_error(
        _status_error(503, {"retry-after-ms": "250"}), label="openai:m", model="m", base_url="u", key_env="K"
    )
    assert (error.retryable, error.status, error.retry_after) == (True, 503, 0.25)
    assert "slow down" in str(error)
    bug = to_model_call_error(KeyError("choices"), label="openai:m", model="m", base_url="u", key_env="K")
    assert not bug.retryable and "KeyError" in str(bug)


def _keys(**overrides: str | None) -> dict[str, str | None]:
    keys: dict[str, str | None] = {
        "openai_api_key": None,
        "openai_base_url": None,
        "anthropic_api_key": None,
        "anthropic_base_url": None,
    }
    keys.update(overrides)
    return keys


@pytest.mark.fast
def test_missing_keys_are_refused_early_with_the_variable_to_set() -> None:
    openai_problem = check_credentials(ModelSpec.parse("openai:gpt-4o"), **_keys())
    assert openai_problem is not None and "OPENAI_API_KEY" in openai_problem
    anthropic_problem = check_credentials(ModelSpec.parse("anthropic:claude-x"), **_keys())
    assert anthropic_problem is not None and "ANTHROPIC_API_KEY" in anthropic_problem
    for spec in ["openai:gpt-4o", "anthropic:claude-x"]:
        with pytest.raises(ModelCallError) as info:
            open_provider(ModelSpec.parse(spec), **_keys())
        assert not info.value.retryable and "API_KEY" in str(info.value)
        # The worker says the key is missing in its own environment, and where that is.
        assert "not set in the worker's environment" in str(info.value)
        assert "where `shopfloor dev` or `shopfloor worker` runs" in str(info.value)
    # A compatible server (vLLM, Ollama) needs no key, and given keys are enough.
    assert check_credentials(ModelSpec.parse("openai:llama3"), **_keys(openai_base_url="http://h/v1")) is None
    assert check_credentials(ModelSpec.parse("openai:gpt-4o"), **_keys(openai_api_key="sk")) is None
    assert check_credentials(ModelSpec.parse("anthropic:c"), **_keys(anthropic_api_key="sk")) is None


@pytest.mark.fast
async def test_open_provider_builds_each_kind() -> None:
    keys = _keys(openai_api_key="sk", anthropic_api_key="sk-ant", anthropic_base_url="http://h")
    openai_provider = open_provider(ModelSpec.parse("openai:gpt-4o"), **keys)
    anthropic_provider = open_provider(ModelSpec.parse("anthropic:claude-x"), **keys)
    scripted = open_provider(ModelSpec.parse("scripted:explore-demo"), **_keys())
    assert isinstance(openai_provider, OpenAIChatProvider) and openai_provider.label == "openai:gpt-4o"
    assert isinstance(anthropic_provider, AnthropicMessagesProvider) and anthropic_provider.base_url == "http://h"
    assert "scripted" in scripted.label
    for p in (openai_provider, anthropic_provider, scripted):
        assert isinstance(p, ModelProvider)
        await p.aclose()
