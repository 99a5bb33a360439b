"""The blob store: file store on a temp dir, S3 store against a real S3-compatible server (moto)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from pydantic import BaseModel

from shopfloor.blobs import (
    BlobCorrupted,
    BlobStore,
    FileBlobStore,
    S3BlobStore,
    canonical_json,
    digest_of,
    get_json,
    open_blob_store,
    put_json,
)
from shopfloor.errors import BlobNotFound, UsageError

MISSING = "0" * 64


@pytest.mark.fast
def test_digest_of_is_sha256_hex() -> None:
    assert digest_of(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert digest_of(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# --- file store ---------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> FileBlobStore:
    return FileBlobStore(tmp_path / "blobs")


@pytest.mark.fast
async def test_file_round_trip_and_layout(store: FileBlobStore) -> None:
    data = b"\x00binary\xffpayload" * 1000
    digest = await store.put(data)

    assert digest == hashlib.sha256(data).hexdigest()
    assert await store.get(digest) == data
    assert await store.exists(digest)
    # Fan-out layout root/ab/cd/<digest>, and no temp files left behind.
    path = store.root / digest[:2] / digest[2:4] / digest
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == [digest]


@pytest.mark.fast
async def test_file_put_is_idempotent(store: FileBlobStore) -> None:
    first = await store.put(b"same bytes")
    mtime = store.path_for(first).stat().st_mtime_ns
    second = await store.put(b"same bytes")

    assert first == second
    assert store.path_for(first).stat().st_mtime_ns == mtime  # not rewritten
    assert [p for p in store.root.rglob("*") if p.is_file()] == [store.path_for(first)]


@pytest.mark.fast
async def test_file_concurrent_puts_of_the_same_blob(store: FileBlobStore) -> None:
    data = os.urandom(256 * 1024)
    digests = await asyncio.gather(*(store.put(data) for _ in range(20)))

    assert set(digests) == {digest_of(data)}
    assert await store.get(digests[0]) == data
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert files == [store.path_for(digests[0])]  # one blob, no stray temp files


@pytest.mark.fast
async def test_file_missing_digest_raises_blob_not_found(store: FileBlobStore) -> None:
    with pytest.raises(BlobNotFound, match=MISSING):
        await store.get(MISSING)
    assert not await store.exists(MISSING)


@pytest.mark.fast
async def test_file_corruption_is_detected(store: FileBlobStore) -> None:
    digest = await store.put(b"the original bytes")
    store.path_for(digest).write_bytes(b"the tampered bytes")

    with pytest.raises(BlobCorrupted, match=f"blob {digest} .* is corrupted"):
        await store.get(digest)


@pytest.mark.fast
async def test_file_put_heals_a_truncated_blob(store: FileBlobStore) -> None:
    digest = await store.put(b"0123456789")
    store.path_for(digest).write_bytes(b"01234")
    assert await store.put(b"0123456789") == digest
    assert await store.get(digest) == b"0123456789"


@pytest.mark.fast
@pytest.mark.parametrize(
    "bad",
    [
        "../../etc/passwd",
        "../" + "a" * 61,
        "A" * 64,  # uppercase
        "a" * 63,
        "a" * 65,
        "a" * 64 + "\n",
        "g" * 64,
        "",
    ],
)
async def test_malformed_digest_is_rejected(store: FileBlobStore, bad: str) -> None:
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        await store.get(bad)
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        await store.exists(bad)
    assert not store.root.exists()  # nothing touched on disk


@pytest.mark.fast
def test_file_store_satisfies_the_protocol(store: FileBlobStore) -> None:
    assert isinstance(store, BlobStore)


@pytest.mark.fast
async def test_file_put_file_and_get_file_stream_a_large_blob(store: FileBlobStore, tmp_path: Path) -> None:
    source = tmp_path / "patch"
    data = os.urandom(3 * 1024 * 1024 + 17)  # several chunks and a partial one
    source.write_bytes(data)

    digest = await store.put_file(source)
    assert digest == digest_of(data)
    assert store.path_for(digest).read_bytes() == data
    assert await store.put_file(source) == digest  # idempotent
    assert await store.put(data) == digest  # the same blob either way
    assert sorted(p.name for p in store.root.iterdir()) == [digest[:2]]  # no temp file left behind

    dest = tmp_path / "out"
    assert await store.get_file(digest, dest) == len(data)
    assert dest.read_bytes() == data


@pytest.mark.fast
async def test_file_put_file_heals_a_truncated_blob(store: FileBlobStore, tmp_path: Path) -> None:
    source = tmp_path / "patch"
    source.write_bytes(b"0123456789")
    digest = await store.put_file(source)
    store.path_for(digest).write_bytes(b"01234")
    assert await store.put_file(source) == digest
    assert await store.get(digest) == b"0123456789"


@pytest.mark.fast
async def test_file_get_file_refuses_a_corrupted_or_missing_blob(store: FileBlobStore, tmp_path: Path) -> None:
    digest = await store.put(b"the original bytes")
    store.path_for(digest).write_bytes(b"the tampered bytes")
    dest = tmp_path / "out"
    with pytest.raises(BlobCorrupted, match="is corrupted"):
        await store.get_file(digest, dest)
    assert not dest.exists()  # never half a patch on disk
    with pytest.raises(BlobNotFound, match=f"no blob {MISSING}"):
        await store.get_file(MISSING, dest)
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        await store.get_file("../../etc/passwd", dest)


# --- JSON ---------------------------------------------------------------------------------------


class Note(BaseModel):
    title: str
    tags: list[str] = []
    score: float = 0.5


@pytest.mark.fast
async def test_put_json_is_canonical(store: FileBlobStore) -> None:
    a = await put_json(store, {"b": 1, "a": {"y": [1, 2], "x": "é"}})
    b = await put_json(store, {"a": {"x": "é", "y": [1, 2]}, "b": 1})

    assert a == b
    assert store.path_for(a).read_bytes() == '{"a":{"x":"é","y":[1,2]},"b":1}'.encode()
    assert await get_json(store, a) == {"a": {"x": "é", "y": [1, 2]}, "b": 1}


@pytest.mark.fast
async def test_put_json_dumps_pydantic_models(store: FileBlobStore) -> None:
    note = Note(title="fix login", tags=["auth"])
    digest = await put_json(store, note)

    assert digest == await put_json(store, {"tags": ["auth"], "title": "fix login", "score": 0.5})
    assert Note.model_validate(await get_json(store, digest)) == note
    # Models nested in plain containers are dumped too.
    assert canonical_json([note]) == b'[{"score":0.5,"tags":["auth"],"title":"fix login"}]'


@pytest.mark.fast
def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


# --- choosing a store -------------------------------------------------------------------------------


@pytest.mark.fast
def test_open_blob_store_default_is_data_dir_blobs(tmp_path: Path) -> None:
    store = open_blob_store(url=None, data_dir=tmp_path)
    assert isinstance(store, FileBlobStore) and store.root == tmp_path / "blobs"
    store = open_blob_store(url="  ", data_dir=tmp_path)
    assert isinstance(store, FileBlobStore) and store.root == tmp_path / "blobs"


@pytest.mark.fast
def test_open_blob_store_file_url_and_plain_path(tmp_path: Path) -> None:
    store = open_blob_store(url=f"file://{tmp_path}/my%20blobs", data_dir=Path("/unused"))
    assert isinstance(store, FileBlobStore) and store.root == tmp_path / "my blobs"
    store = open_blob_store(url=str(tmp_path / "plain"), data_dir=Path("/unused"))
    assert isinstance(store, FileBlobStore) and store.root == tmp_path / "plain"


@pytest.mark.fast
def test_open_blob_store_s3_url(monkeypatch: pytest.MonkeyPatch) -> None:
    _dummy_aws_env(monkeypatch)
    store = open_blob_store(
        url="s3://my-bucket/shopfloor/blobs/", data_dir=Path("/unused"), s3_endpoint_url="http://127.0.0.1:9"
    )
    assert isinstance(store, S3BlobStore)
    assert (store.bucket, store.prefix) == ("my-bucket", "shopfloor/blobs")
    assert store.key_for(MISSING) == f"shopfloor/blobs/00/00/{MISSING}"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/blobs", "unsupported blob store URL"),
        ("gs://bucket/prefix", "unsupported blob store URL"),
        ("file://relative/path", "absolute path"),
        ("s3:///prefix-only", "name a bucket"),
        ("s3://bucket/prefix?region=eu", "no query"),
    ],
)
def test_open_blob_store_rejects_bad_urls(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        open_blob_store(url=url, data_dir=Path("/unused"))


# --- S3 against a real S3-compatible server ----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dummy_aws_env(mp: pytest.MonkeyPatch) -> None:
    # Dummy credentials, and no developer's ~/.aws config leaking into the test.
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    mp.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    mp.delenv("AWS_PROFILE", raising=False)
    mp.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, object]:
    """A fresh bucket on the moto server, and a plain boto3 client to inspect it."""
    _dummy_aws_env(monkeypatch)
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    bucket = f"blobs-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    return bucket, client


def _s3_store(s3_endpoint: str, bucket: str, prefix: str = "shopfloor/blobs") -> S3BlobStore:
    # Through open_blob_store, so the real client construction (endpoint, retries) is exercised.
    store = open_blob_store(url=f"s3://{bucket}/{prefix}", data_dir=Path("/unused"), s3_endpoint_url=s3_endpoint)
    assert isinstance(store, S3BlobStore)
    return store


async def test_s3_round_trip(s3_endpoint: str, s3_bucket: tuple[str, object]) -> None:
    bucket, _ = s3_bucket
    store = _s3_store(s3_endpoint, bucket)
    data = os.urandom(100_000)

    digest = await store.put(data)
    assert digest == digest_of(data)
    assert await store.exists(digest)
    assert await store.get(digest) == data
    assert await get_json(store, await put_json(store, {"b": [1], "a": "x"})) == {"a": "x", "b": [1]}


async def test_s3_put_file_and_get_file_stream_in_parts(
    s3_endpoint: str, s3_bucket: tuple[str, object], tmp_path: Path
) -> None:
    bucket, client = s3_bucket
    store = _s3_store(s3_endpoint, bucket)
    source = tmp_path / "patch"
    data = os.urandom(9 * 1024 * 1024 + 5)  # past boto3's multipart threshold
    source.write_bytes(data)

    digest = await store.put_file(source)
    assert digest == digest_of(data)
    head = client.head_object(Bucket=bucket, Key=store.key_for(digest))  # type: ignore[attr-defined]
    assert head["ContentLength"] == len(data) and head["Metadata"] == {"sha256": digest}
    assert await store.put_file(source) == digest

    dest = tmp_path / "out"
    assert await store.get_file(digest, dest) == len(data)
    assert dest.read_bytes() == data

    client.put_object(Bucket=bucket, Key=store.key_for(digest), Body=b"tampered")  # type: ignore[attr-defined]
    with pytest.raises(BlobCorrupted, match="is corrupted"):
        await store.get_file(digest, tmp_path / "again")
    assert not (tmp_path / "again").exists()
    with pytest.raises(BlobNotFound):
        await store.get_file(MISSING, tmp_path / "missing")


async def test_s3_put_is_idempotent(s3_endpoint: str, s3_bucket: tuple[str, object]) -> None:
    bucket, client = s3_bucket
    store = _s3_store(s3_endpoint, bucket)

    uploads: list[str] = []
    # Count the PutObject calls the store's own client makes.
    store._client.meta.events.register("before-call.s3.PutObject", lambda **kw: uploads.append("put"))

    first = await store.put(b"same bytes")
    again = await asyncio.gather(*(store.put(b"same bytes") for _ in range(5)))

    assert set(again) == {first}
    assert uploads == ["put"]  # the HEAD check skipped every re-upload
    listing = client.list_objects_v2(Bucket=bucket)["Contents"]  # type: ignore[attr-defined]
    assert [o["Key"] for o in listing] == [store.key_for(first)]


async def test_s3_missing_digest_raises_blob_not_found(s3_endpoint: str, s3_bucket: tuple[str, object]) -> None:
    bucket, _ = s3_bucket
    store = _s3_store(s3_endpoint, bucket)

    with pytest.raises(BlobNotFound, match=f"no blob {MISSING} at s3://{bucket}/"):
        await store.get(MISSING)
    assert not await store.exists(MISSING)
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        await store.get("../../etc/passwd")


async def test_s3_prefix_is_respected(s3_endpoint: str, s3_bucket: tuple[str, object]) -> None:
    bucket, client = s3_bucket
    store = _s3_store(s3_endpoint, bucket, prefix="team-a/blobs")
    other = _s3_store(s3_endpoint, bucket, prefix="team-b")

    digest = await store.put(b"under a prefix")

    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]  # type: ignore[attr-defined]
    assert keys == [f"team-a/blobs/{digest[:2]}/{digest[2:4]}/{digest}"]
    # Another prefix in the same bucket is another store.
    assert not await other.exists(digest)
    with pytest.raises(BlobNotFound):
        await other.get(digest)


async def test_s3_corruption_is_detected(s3_endpoint: str, s3_bucket: tuple[str, object]) -> None:
    bucket, client = s3_bucket
    store = _s3_store(s3_endpoint, bucket)
    digest = await store.put(b"the original bytes")
    client.put_object(Bucket=bucket, Key=store.key_for(digest), Body=b"tampered")  # type: ignore[attr-defined]

    with pytest.raises(BlobCorrupted, match="is corrupted"):
        await store.get(digest)
