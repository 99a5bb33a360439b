"""The content-addressed blob store: bytes in, sha256 hex digest out.

Workflow history carries only digests; the bytes live here — in a local directory by default, or
in any S3-compatible bucket. Because a digest names exactly one byte string, every write is
idempotent and concurrent writers of the same blob cannot conflict.

Large blobs (workspace patches) go through `put_file` / `get_file`, which stream between a file
and the store in chunks of CHUNK_BYTES: the worker never holds a whole patch in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from shopfloor.errors import BlobNotFound, ShopfloorError, UsageError

_DIGEST_RE = re.compile(r"[0-9a-f]{64}")
CHUNK_BYTES = 1024 * 1024  # what a streaming put or get holds in memory at a time


class BlobCorrupted(ShopfloorError):
    """The stored bytes no longer hash to their digest (disk damage, a hand-edited file...)."""


@runtime_checkable
class BlobStore(Protocol):
    async def put(self, data: bytes) -> str:
        """Store `data`; return its sha256 hex digest. Idempotent."""
        ...

    async def get(self, digest: str) -> bytes:
        """The bytes stored under `digest`; BlobNotFound if none, BlobCorrupted if damaged."""
        ...

    async def exists(self, digest: str) -> bool: ...

    async def put_file(self, path: Path) -> str:
        """Store the bytes of the file at `path`, streamed; return their digest. Idempotent."""
        ...

    async def get_file(self, digest: str, dest: Path) -> int:
        """Write the blob to a new file `dest`, streamed and verified; its size. BlobNotFound if
        none, BlobCorrupted if damaged (and `dest` is removed)."""
        ...

    async def put_ref(self, name: str, digest: str) -> None:
        """Point the name `name` (check_ref_name) at `digest`, replacing what it named."""
        ...

    async def get_ref(self, name: str) -> str | None:
        """The digest `name` points at (None: no such name, or not a digest)."""
        ...


_REF_NAME = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


def check_ref_name(name: str) -> str:
    """A ref name: path segments of letters, digits, '.', '_' and '-' (never '..'), at most 200 characters."""
    if len(name) > 200 or not _REF_NAME.fullmatch(name) or ".." in name.split("/"):
        raise ValueError(f"not a usable ref name: {name!r}")
    return name


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> tuple[str, int]:
    """(sha256 hex digest, size) of a file, read in chunks."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _copy_verified(digest: str, chunks: Iterable[bytes], dest: Path, where: str) -> int:
    """Write `chunks` to a new file `dest`, hashing them; BlobCorrupted (and no `dest`) if they
    do not hash to `digest`."""
    h, size = hashlib.sha256(), 0
    try:
        with open(dest, "xb") as f:
            for chunk in chunks:
                h.update(chunk)
                f.write(chunk)
                size += len(chunk)
        if h.hexdigest() != digest:
            raise BlobCorrupted(
                f"blob {digest} at {where} is corrupted: its {size} bytes hash to {h.hexdigest()}. "
                "Delete it and re-run the step that produced it."
            )
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        raise
    return size


def _chunks(f: BinaryIO) -> Iterable[bytes]:
    while chunk := f.read(CHUNK_BYTES):
        yield chunk


def check_digest(digest: object) -> str:
    """Return `digest` if it is 64 lowercase hex characters, else raise ValueError.

    Digests become file names and object keys, so anything else (`../../etc/passwd`) is refused
    before it gets near a path.
    """
    # fullmatch, not match+$: `$` would accept a trailing newline.
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest):
        raise ValueError(f"not a sha256 hex digest (64 lowercase hex characters): {digest!r}")
    return digest


def _verified(digest: str, data: bytes, where: str) -> bytes:
    actual = digest_of(data)
    if actual != digest:
        raise BlobCorrupted(
            f"blob {digest} at {where} is corrupted: its {len(data)} bytes hash to {actual}. "
            "Delete it and re-run the step that produced it."
        )
    return data


def _fan_out(digest: str) -> str:
    # Two levels of 256 directories keep any one directory small at millions of blobs.
    return f"{digest[:2]}/{digest[2:4]}/{digest}"


# --- JSON -------------------------------------------------------------------------------------


def canonical_json(obj: Any) -> bytes:
    """One byte string per value: sorted keys, compact separators, UTF-8.

    The same data in another key order yields the same bytes, hence the same digest.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    else:
        obj = to_jsonable_python(obj)  # nested models, datetimes, paths ...
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


async def put_json(store: BlobStore, model_or_obj: Any) -> str:
    return await store.put(canonical_json(model_or_obj))


async def get_json(store: BlobStore, digest: str) -> Any:
    return json.loads(await store.get(digest))


# --- local directory ----------------------------------------------------------------------------


class FileBlobStore:
    """Blobs as files under `root/ab/cd/<digest>`, written atomically."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, digest: str) -> Path:
        return self.root / _fan_out(check_digest(digest))

    async def put_ref(self, name: str, digest: str) -> None:
        await asyncio.to_thread(self._put_ref_sync, self.root / "refs" / check_ref_name(name), check_digest(digest))

    async def get_ref(self, name: str) -> str | None:
        return await asyncio.to_thread(_read_ref, self.root / "refs" / check_ref_name(name))

    def _put_ref_sync(self, path: Path, digest: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ref-", suffix=".tmp")  # renamed into place
        with os.fdopen(fd, "w") as f:
            f.write(digest)
        os.replace(tmp, path)

    async def put(self, data: bytes) -> str:
        # Hashing and writing a large blob would stall the event loop: both go to a thread.
        return await asyncio.to_thread(self._put_sync, bytes(data))

    async def get(self, digest: str) -> bytes:
        path = self.path_for(digest)
        return await asyncio.to_thread(self._get_sync, digest, path)

    async def exists(self, digest: str) -> bool:
        path = self.path_for(digest)
        # A stat can hang on network filesystems too.
        return await asyncio.to_thread(path.is_file)

    async def put_file(self, path: Path) -> str:
        return await asyncio.to_thread(self._put_file_sync, Path(path))

    async def get_file(self, digest: str, dest: Path) -> int:
        source = self.path_for(digest)
        return await asyncio.to_thread(self._get_file_sync, digest, source, Path(dest))

    def _put_sync(self, data: bytes) -> str:
        digest = digest_of(data)
        path = self.root / _fan_out(digest)
        try:
            # Same name means same bytes; the size check also heals a truncated file.
            if path.stat().st_size == len(data):
                return digest
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        # A private temp file in the same directory, renamed into place: readers never see a
        # partial blob, and concurrent writers of the same blob each replace it with equal bytes.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{digest[:12]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                # The digest goes into workflow history next; the bytes must survive a crash.
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(path.parent)
        return digest

    def _put_file_sync(self, source: Path) -> str:
        # The digest names the destination, so the bytes are hashed while they are copied to a
        # private temp file beside the fan-out directories (same filesystem), then renamed.
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".incoming.", suffix=".tmp")
        try:
            h, size = hashlib.sha256(), 0
            with os.fdopen(fd, "wb") as out, open(source, "rb") as f:
                for chunk in _chunks(f):
                    h.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            digest = h.hexdigest()
            path = self.root / _fan_out(digest)
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_size == size:  # already stored (the size check heals a truncated one)
                    os.unlink(tmp)
                    return digest
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(path.parent)
        return digest

    def _get_file_sync(self, digest: str, source: Path, dest: Path) -> int:
        try:
            f = open(source, "rb")
        except FileNotFoundError:
            raise BlobNotFound(f"no blob {digest} in {self.root}") from None
        with f:
            return _copy_verified(digest, _chunks(f), dest, str(source))

    def _get_sync(self, digest: str, path: Path) -> bytes:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(f"no blob {digest} in {self.root}") from None
        return _verified(digest, data, str(path))

    def __repr__(self) -> str:
        return f"FileBlobStore({str(self.root)!r})"


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform or filesystem allows it.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --- S3 and S3-compatible stores -------------------------------------------------------------------


class S3BlobStore:
    """Blobs as objects `<prefix>/ab/cd/<digest>` in one bucket (same layout as the file store,
    so a directory can be synced to a bucket and back)."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        client: Any = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._client = client if client is not None else _make_s3_client(endpoint_url, region_name)

    def key_for(self, digest: str) -> str:
        key = _fan_out(check_digest(digest))
        return f"{self.prefix}/{key}" if self.prefix else key

    def _ref_key(self, name: str) -> str:
        key = f"refs/{check_ref_name(name)}"
        return f"{self.prefix}/{key}" if self.prefix else key

    async def put_ref(self, name: str, digest: str) -> None:
        body = check_digest(digest).encode()
        await asyncio.to_thread(self._client.put_object, Bucket=self.bucket, Key=self._ref_key(name), Body=body)

    async def get_ref(self, name: str) -> str | None:
        return await asyncio.to_thread(self._get_ref_sync, self._ref_key(name))

    def _get_ref_sync(self, key: str) -> str | None:
        try:
            response = self._get_object("ref", key)
        except BlobNotFound:
            return None
        with response["Body"] as body:
            return _digest_or_none(body.read().decode("utf-8", "replace"))

    async def put(self, data: bytes) -> str:
        return await asyncio.to_thread(self._put_sync, bytes(data))

    async def get(self, digest: str) -> bytes:
        key = self.key_for(digest)
        return await asyncio.to_thread(self._get_sync, digest, key)

    async def exists(self, digest: str) -> bool:
        key = self.key_for(digest)
        return await asyncio.to_thread(self._head, key, False)

    async def put_file(self, path: Path) -> str:
        return await asyncio.to_thread(self._put_file_sync, Path(path))

    async def get_file(self, digest: str, dest: Path) -> int:
        key = self.key_for(digest)
        return await asyncio.to_thread(self._get_file_sync, digest, key, Path(dest))

    def _put_file_sync(self, path: Path) -> str:
        digest, _ = file_digest(path)
        key = self.key_for(digest)
        if self._head(key, True):
            return digest
        from boto3.s3.transfer import TransferConfig

        # A multipart upload read from the file part by part: two parts in flight at most, so
        # memory stays at a few parts whatever the file's size.
        transfer = TransferConfig(multipart_chunksize=8 * 1024 * 1024, max_concurrency=2)
        self._client.upload_file(
            str(path),
            self.bucket,
            key,
            Config=transfer,
            ExtraArgs={"ContentType": "application/octet-stream", "Metadata": {"sha256": digest}},
        )
        return digest

    def _get_file_sync(self, digest: str, key: str, dest: Path) -> int:
        body = self._get_object(digest, key)["Body"]  # a botocore StreamingBody, read part by part
        try:
            return _copy_verified(digest, body.iter_chunks(CHUNK_BYTES), dest, f"s3://{self.bucket}/{key}")
        finally:
            body.close()

    def _get_object(self, digest: str, key: str) -> Any:
        from botocore.exceptions import ClientError

        try:
            return self._client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                raise BlobNotFound(f"no blob {digest} at s3://{self.bucket}/{key}") from None
            raise

    def _put_sync(self, data: bytes) -> str:
        digest = digest_of(data)
        key = self.key_for(digest)
        # Content-addressed: an object under this key already holds these bytes.
        if self._head(key, True):
            return digest
        self._client.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=data,
            ContentType="application/octet-stream",
            Metadata={"sha256": digest},
        )
        return digest

    def _head(self, key: str, missing_on_forbidden: bool) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._client.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                return False
            # Without s3:ListBucket, S3 answers 403 for a missing key; put then just uploads
            # (and fails clearly on its own if writing is not allowed either).
            if missing_on_forbidden and code in ("403", "AccessDenied", "Forbidden"):
                return False
            raise

    def _get_sync(self, digest: str, key: str) -> bytes:
        response = self._get_object(digest, key)
        with response["Body"] as body:
            data = body.read()
        return _verified(digest, data, f"s3://{self.bucket}/{key}")

    def __repr__(self) -> str:
        return f"S3BlobStore(bucket={self.bucket!r}, prefix={self.prefix!r})"


def _digest_or_none(text: str) -> str | None:
    try:
        return check_digest(text.strip())
    except ValueError:
        return None


def _read_ref(path: Path) -> str | None:
    try:
        return _digest_or_none(path.read_text())
    except (OSError, UnicodeError):
        return None


def _make_s3_client(endpoint_url: str | None, region_name: str | None) -> Any:
    # Imported here: boto3 is slow to import and only S3 deployments need it.
    import boto3
    from botocore.config import Config

    config = Config(
        # Temporal owns retries (docs/design.md, Layout and import rules): one quick retry for a
        # dropped connection, no more.
        retries={"max_attempts": 2, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
    )
    if endpoint_url:
        config = config.merge(
            Config(
                # MinIO, moto, R2 ... serve buckets by path, not by virtual host name.
                s3={"addressing_style": "path"},
                # Not every S3-compatible store understands the newer default checksums.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            )
        )
    # A session of its own: boto3's default session is not thread-safe to create lazily.
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=endpoint_url, region_name=region_name, config=config)


# --- choosing a store -----------------------------------------------------------------------------


def open_blob_store(*, url: str | None, data_dir: Path, s3_endpoint_url: str | None = None) -> BlobStore:
    """The store a `SHOPFLOOR_BLOB_URL` names.

    None -> `<data_dir>/blobs`; a path or `file:///abs/path` -> that directory;
    `s3://bucket/prefix` -> that bucket (at `s3_endpoint_url` for S3-compatible stores).
    """
    if url is None or not url.strip():
        return FileBlobStore(Path(data_dir) / "blobs")
    url = url.strip()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "" or (len(scheme) == 1 and url[1:2] == ":"):  # a plain path (or C:\ drive)
        return FileBlobStore(Path(url).expanduser())
    if scheme == "file":
        path = unquote(parts.path)
        if parts.netloc not in ("", "localhost") or not path.startswith("/"):
            raise UsageError(
                f"blob store URL {url!r}: a file URL needs an absolute path, like file:///var/lib/shopfloor/blobs"
            )
        return FileBlobStore(Path(path))
    if scheme == "s3":
        if not parts.netloc:
            raise UsageError(f"blob store URL {url!r}: name a bucket, like s3://my-bucket/shopfloor")
        if parts.query or parts.fragment:
            raise UsageError(
                f"blob store URL {url!r}: s3 URLs take no query or fragment; "
                "set SHOPFLOOR_S3_ENDPOINT_URL for S3-compatible stores"
            )
        return S3BlobStore(parts.netloc, unquote(parts.path), endpoint_url=s3_endpoint_url)
    raise UsageError(
        f"unsupported blob store URL {url!r}: use a directory path, file:///absolute/path or s3://bucket/prefix"
    )
