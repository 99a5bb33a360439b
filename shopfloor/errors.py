"""Errors that cross layers. Each says what went wrong in words a user can act on."""

from __future__ import annotations


class ShopfloorError(Exception):
    """Base for errors shopfloor raises on purpose."""


class UsageError(ShopfloorError):
    """Bad input from a user (CLI flag, setting): one clear line, exit status 2."""


class TemporalUnreachable(ShopfloorError):
    """No Temporal server answers at the configured address."""


class ModelCallError(ShopfloorError):
    """A model provider call failed.

    `retryable` follows the provider's answer: 429, 5xx, timeouts and dropped connections are
    worth retrying (after `retry_after` seconds when the provider said so); 400/401/403/404 are not.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class ToolError(ShopfloorError):
    """A tool could not do what was asked. Becomes an error *result* the model reads."""


class BlobNotFound(ShopfloorError):
    """No blob is stored under this digest."""
