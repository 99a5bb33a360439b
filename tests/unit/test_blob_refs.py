"""Named refs in the blob store: a name that points at a digest, replaced atomically, and names
that could leave the store's directory or bucket prefix refused."""

from __future__ import annotations

import pytest

from shopfloor.blobs import FileBlobStore, check_ref_name

pytestmark = pytest.mark.fast

DIGEST = "a" * 64


async def test_a_ref_points_at_the_last_digest_put(tmp_path):
    store = FileBlobStore(tmp_path)
    assert await store.get_ref("environments/k1") is None
    await store.put_ref("environments/k1", DIGEST)
    await store.put_ref("environments/k1", "b" * 64)
    assert await store.get_ref("environments/k1") == "b" * 64
    (tmp_path / "refs" / "environments" / "k2").write_text("not a digest")
    assert await store.get_ref("environments/k2") is None  # a damaged ref names nothing


@pytest.mark.parametrize("name", ["../x", "a/../../b", "/abs", "a//b", "", "a b", "x" * 201])
def test_names_that_could_leave_the_store_are_refused(name):
    with pytest.raises(ValueError):
        check_ref_name(name)
