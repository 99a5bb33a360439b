"""The shared webhook signature helper, checked with GitHub's official test vector."""

from __future__ import annotations

import pytest

from shopfloor.github_signature import sign, verify

pytestmark = pytest.mark.fast

SECRET = b"It's a Secret to Everybody"
BODY = b"Hello, World!"
EXPECTED = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_githubs_test_vector():
    assert sign(SECRET, BODY) == EXPECTED
    assert verify(SECRET, BODY, EXPECTED)


def test_rejects_wrong_body_secret_or_header():
    assert not verify(SECRET, BODY + b" ", EXPECTED)
    assert not verify(b"other", BODY, EXPECTED)
    assert not verify(SECRET, BODY, None)
    assert not verify(SECRET, BODY, "")
    assert not verify(SECRET, BODY, EXPECTED.removeprefix("sha256="))
    assert not verify(b"", BODY, sign(b"", BODY))
