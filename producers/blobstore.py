"""Blob stores: where claim-checked captures and ingest segments live.

One small :class:`BlobStore` protocol, two implementations that pass the same contract suite:
:class:`LocalBlobStore` (a directory; the embedded default) and :class:`S3BlobStore` (any
S3-compatible server through the ``minio`` SDK). Keys are ``/``-separated relative paths such as
``claims/agt_1/dec_01.../<sha256>.avro``.

The contract, for both:

- ``put`` is atomic: a reader sees the whole old object or the whole new one, never a part.
  ``put`` of an existing key overwrites it (deterministic keys make redelivery idempotent).
- ``get(key, offset=, length=)`` returns ``data[offset:offset + length]`` (``length=None``: to the
  end). A range past the end is truncated to the end; a range that *starts* at or past the end of
  a non-empty object raises :class:`BlobStoreError`; any range of an empty object is ``b""``.
- ``delete`` is idempotent; ``exists`` is a cheap check; ``list(prefix)`` yields keys starting
  with ``prefix`` (a string prefix, as in S3) in lexicographic order; ``list_info(prefix)`` yields
  the same keys as :class:`BlobInfo` (size and last-modified time) and ``stat(key)`` one of them.
  ``modified`` is when the object's current bytes were written: a ``put`` over an existing key
  renews it (retention's orphan sweep relies on that to leave blobs being written again alone).
- A missing key raises :class:`BlobNotFound`; every other failure raises :class:`BlobStoreError`
  (library errors are wrapped with ``from``).

Immutability where the store offers it (S3 Object Lock, ``BLACKBOX_S3_OBJECT_LOCK``): ``put(...,
retain_until=)`` writes the object under retention until that date, ``set_legal_hold(key, on)`` sets or
clears a legal hold, and ``lock_reason(key)`` says why a delete would be refused (None: it would not).
A refused ``delete`` raises :class:`BlobLocked`. With the lock off (always on the local store) these are
no-ops that say so: ``set_legal_hold`` returns False and ``lock_reason`` None.

Reading what was sealed (a locking bucket is versioned, ``versioned`` True): ``put`` returns the version
id it wrote, ``get(..., version_id=)`` reads that version whatever lies over it, ``covering(key,
version_id)`` says what does (a delete marker, a newer version; None when it is still the current
one) and ``versions(key)`` lists the versions holding bytes. On a store without versions ``put``
returns None, ``version_id`` is ignored, ``covering`` is None and ``versions`` empty.

Conditional writes, for one writer fenced in the store (DESIGN 23): ``put_if(key, data, etag=None)``
creates ``key`` only if it does not exist (S3 ``If-None-Match: *``); ``put_if(key, data, etag=E)``
replaces it only while its current ETag is ``E`` (``If-Match``; a missing key fails too); ``metadata``
is stored as S3 user metadata (who wrote it, for audits; the local store keeps none). A failed
precondition raises :class:`BlobConflict`; success returns the new object's :class:`Tagged` (its ETag,
and its version id on a versioned bucket). ``get_tagged(key)`` reads the bytes with their ETag and
version. The local store gives the same guarantees between processes of one host (a lock file).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from producers.owner_only import create_private, private_dirs
from schemas.errors import BlobConflict, BlobLocked, BlobNotFound, BlobStoreError

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = [
    "BlobInfo",
    "BlobStore",
    "LocalBlobStore",
    "S3BlobStore",
    "Tagged",
    "open_blob_store",
    "validate_key",
]

_TEMP_MARK = ".tmp-"

ObjectLockMode = Literal["off", "governance", "compliance"]


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """One stored object: its key, size in bytes and when its current bytes were written (aware UTC)."""

    key: str
    size: int
    modified: datetime


@dataclass(frozen=True, slots=True)
class Tagged:
    """An object's identity as written or read: its ETag, its version id (None when unversioned) and,
    from ``get_tagged``, its bytes."""

    etag: str
    version: str | None = None
    data: bytes = b""


@runtime_checkable
class BlobStore(Protocol):
    """Put, range-get, delete and list immutable-by-key blobs."""

    @property
    def versioned(self) -> bool: ...

    def put(self, key: str, data: bytes, *, retain_until: datetime | None = None) -> str | None: ...

    def set_legal_hold(self, key: str, on: bool) -> bool: ...

    def lock_reason(self, key: str) -> str | None: ...

    def get(
        self, key: str, *, offset: int = 0, length: int | None = None, version_id: str | None = None
    ) -> bytes: ...

    def covering(self, key: str, version_id: str) -> str | None: ...

    def versions(self, key: str) -> list[str]: ...

    def delete(self, key: str) -> None: ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str = "") -> Iterator[str]: ...

    def stat(self, key: str) -> BlobInfo: ...

    def list_info(self, prefix: str = "") -> Iterator[BlobInfo]: ...

    def put_if(
        self,
        key: str,
        data: bytes,
        *,
        etag: str | None,
        retain_until: datetime | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Tagged: ...

    def get_tagged(self, key: str) -> Tagged: ...


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe relative object key; raise :class:`BlobStoreError` otherwise.

    The same rule applies to every store so a key valid on one is valid on all: non-empty
    ``/``-separated segments, none of them ``.`` or ``..``, no backslash or NUL, no temp marker.
    """
    if not key or key.startswith("/") or "\\" in key or "\x00" in key:
        raise BlobStoreError(f"invalid blob key {key!r}")
    for segment in key.split("/"):
        if segment in ("", ".", "..") or segment.startswith(_TEMP_MARK):
            raise BlobStoreError(f"invalid blob key {key!r}")
    return key


def _check_range(offset: int, length: int | None) -> None:
    if offset < 0 or (length is not None and length < 0):
        raise BlobStoreError(f"invalid range offset={offset} length={length}")


class LocalBlobStore:
    """Blobs as files under ``root``; writes go to a temp file, are fsync'd, then renamed."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        try:  # owner-only whatever the process's umask (producers.owner_only)
            private_dirs(self.root)
        except OSError as exc:
            raise BlobStoreError(f"cannot create blob directory {self.root}: {exc}") from exc

    def __repr__(self) -> str:
        return f"LocalBlobStore({str(self.root)!r})"

    @property
    def versioned(self) -> bool:
        return False

    def covering(self, key: str, version_id: str) -> str | None:
        """A directory keeps no versions: nothing to say."""
        return None

    def versions(self, key: str) -> list[str]:
        """A directory keeps no versions."""
        return []

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*validate_key(key).split("/"))

    def put(self, key: str, data: bytes, *, retain_until: datetime | None = None) -> str | None:
        # a directory offers no object lock or versions: ``retain_until`` is accepted and has no effect
        path = self._path(key)
        tmp = path.with_name(f"{_TEMP_MARK}{path.name}.{uuid.uuid4().hex}")
        try:
            private_dirs(path.parent)
            with os.fdopen(create_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise BlobStoreError(f"put {key}: {exc}") from exc
        return None

    def get(
        self, key: str, *, offset: int = 0, length: int | None = None, version_id: str | None = None
    ) -> bytes:
        _check_range(offset, length)
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size and offset >= size:
                    raise BlobStoreError(f"get {key}: range starts at {offset}, past the end ({size} bytes)")
                if length == 0 or not size:
                    return b""
                fh.seek(offset)
                return fh.read() if length is None else fh.read(length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise BlobNotFound(f"no blob {key}") from exc
        except OSError as exc:
            raise BlobStoreError(f"get {key}: {exc}") from exc

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink(missing_ok=True)
        except IsADirectoryError:
            return
        except OSError as exc:
            raise BlobStoreError(f"delete {key}: {exc}") from exc

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def set_legal_hold(self, key: str, on: bool) -> bool:
        """No object lock on a directory: nothing is set (False); the index's hold still applies."""
        return False

    def lock_reason(self, key: str) -> str | None:
        return None

    def list(self, prefix: str = "") -> Iterator[str]:
        # Walk only the directory the prefix names, then filter by string prefix (S3 semantics).
        base_dir, _, _ = prefix.rpartition("/")
        start = self.root.joinpath(*base_dir.split("/")) if base_dir else self.root
        if not start.is_dir():
            return iter(())
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            rel = "" if rel == "." else rel + "/"
            dirnames[:] = [
                d for d in dirnames if (rel + d + "/").startswith(prefix) or prefix.startswith(rel + d)
            ]
            keys.extend(
                rel + name
                for name in filenames
                if not name.startswith(_TEMP_MARK) and (rel + name).startswith(prefix)
            )
        return iter(sorted(keys))

    def stat(self, key: str) -> BlobInfo:
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise BlobNotFound(f"no blob {key}") from exc
        except OSError as exc:
            raise BlobStoreError(f"stat {key}: {exc}") from exc
        if not stat.S_ISREG(st.st_mode):
            raise BlobNotFound(f"no blob {key}")
        return BlobInfo(key, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))

    def list_info(self, prefix: str = "") -> Iterator[BlobInfo]:
        for key in self.list(prefix):
            try:
                yield self.stat(key)
            except BlobNotFound:  # deleted between the listing and the stat
                continue

    def put_if(
        self,
        key: str,
        data: bytes,
        *,
        etag: str | None,
        retain_until: datetime | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Tagged:
        """Create-only (``etag=None``) or compare-and-swap on the MD5 ETag, under one lock file per
        store: atomic between the processes of this host, which are the only ones sharing a directory.
        A directory keeps no ``metadata``."""
        path = self._path(key)
        with self._cas_lock():
            try:
                current = _md5(path.read_bytes())
            except (FileNotFoundError, NotADirectoryError):
                current = None
            except OSError as exc:
                raise BlobStoreError(f"put {key}: {exc}") from exc
            if etag is None and current is not None:
                raise BlobConflict(f"put {key}: it already exists")
            if etag is not None and current != etag:
                raise BlobConflict(f"put {key}: its version is {current or 'missing'}, not {etag}")
            self.put(key, data)
        return Tagged(_md5(data))

    def get_tagged(self, key: str) -> Tagged:
        data = self.get(key)
        return Tagged(_md5(data), None, data)

    @contextlib.contextmanager
    def _cas_lock(self) -> Iterator[None]:
        import fcntl

        fd = os.open(self.root / f"{_TEMP_MARK}cas.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _md5(data: bytes) -> str:
    import hashlib

    # the ETag S3 gives a single-part upload, so both stores name versions alike
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class S3BlobStore:
    """Blobs in one bucket of an S3-compatible server (MinIO, AWS S3) through the ``minio`` SDK.

    The bucket is created on first use if missing. Network and server errors are wrapped as
    :class:`BlobStoreError`; a missing object as :class:`BlobNotFound`.
    """

    def __init__(
        self,
        endpoint: str,
        access_key: str,
        secret_key: str,
        bucket: str,
        secure: bool = False,
        *,
        http_client: Any = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        retries: int = 3,
        object_lock: ObjectLockMode = "off",
    ) -> None:
        try:
            from minio import Minio
        except ModuleNotFoundError as exc:  # the SDK's base install has no S3 client
            raise ImportError(
                "the S3 blob store needs the s3 extra: pip install 'agent-blackbox[s3]'", name=exc.name
            ) from exc

        if http_client is None:
            import urllib3

            http_client = urllib3.PoolManager(
                timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout),
                maxsize=16,
                retries=urllib3.Retry(
                    total=retries, backoff_factor=0.2, status_forcelist=(500, 502, 503, 504)
                ),
            )
        self.endpoint = endpoint
        self.bucket = bucket
        self.object_lock: ObjectLockMode = object_lock
        self._client = Minio(
            endpoint, access_key=access_key, secret_key=secret_key, secure=secure, http_client=http_client
        )
        self._bucket_ready = False

    def __repr__(self) -> str:
        return f"S3BlobStore(endpoint={self.endpoint!r}, bucket={self.bucket!r})"

    @property
    def versioned(self) -> bool:
        """A bucket with Object Lock is versioned: what was sealed is read by its version id."""
        return self.object_lock != "off"

    @classmethod
    def from_settings(cls, settings: BlackboxSettings) -> S3BlobStore:
        return cls(
            settings.s3_endpoint,
            settings.s3_access_key,
            settings.s3_secret_key.get_secret_value(),
            settings.s3_bucket,
            settings.s3_secure,
            # the services' setting (consumers.app.settings); the runtime's settings never lock
            object_lock=getattr(settings, "s3_object_lock", "off"),
        )

    def _ensure_bucket(self) -> None:
        if self._bucket_ready:
            return
        from minio.error import S3Error

        try:
            if not self._client.bucket_exists(self.bucket):
                try:
                    self._client.make_bucket(self.bucket, object_lock=self.object_lock != "off")
                except S3Error as exc:  # another process created it between the two calls
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise
        except Exception as exc:
            raise _wrap(exc, f"bucket {self.bucket}") from exc
        self._bucket_ready = True

    def put(self, key: str, data: bytes, *, retain_until: datetime | None = None) -> str | None:
        validate_key(key)
        self._ensure_bucket()
        retention = None
        if retain_until is not None and self.object_lock != "off":
            from minio.commonconfig import COMPLIANCE, GOVERNANCE
            from minio.retention import Retention

            mode = COMPLIANCE if self.object_lock == "compliance" else GOVERNANCE
            retention = Retention(mode, retain_until.astimezone(UTC))
        try:
            written = self._client.put_object(
                self.bucket, key, io.BytesIO(data), len(data), retention=retention
            )
        except Exception as exc:
            raise _wrap(exc, f"put {key}") from exc
        return getattr(written, "version_id", None) or None

    def covering(self, key: str, version_id: str) -> str | None:
        """What lies over version ``version_id`` of ``key`` now: a delete marker or a newer version (named,
        with when), "the version is gone" when it no longer exists, or None when it is the current one."""
        validate_key(key)
        if not self.versioned:
            return None
        self._ensure_bucket()
        try:
            versions = [
                obj
                for obj in self._client.list_objects(self.bucket, prefix=key, include_version=True)
                if obj.object_name == key
            ]
        except Exception as exc:
            raise _wrap(exc, f"versions of {key}") from exc
        # the SDK gives IsLatest as the XML's text ("true" / "false"), not a bool
        latest = next((v for v in versions if str(v.is_latest).lower() == "true"), None)
        if latest is not None and latest.version_id == version_id:
            return None
        if not any(v.version_id == version_id for v in versions):
            return f"the sealed version {version_id} is gone"
        if latest is None:
            return f"the sealed version {version_id} is no longer the current one"
        when = _aware(latest.last_modified, key).isoformat() if latest.last_modified else "an unknown time"
        if latest.is_delete_marker:
            return (
                f"a delete marker (version {latest.version_id}, {when}) hides the sealed version {version_id}"
            )
        return (
            f"a newer version {latest.version_id} ({latest.size} bytes, {when}) was written over the sealed "
            f"version {version_id}"
        )

    def put_if(
        self,
        key: str,
        data: bytes,
        *,
        etag: str | None,
        retain_until: datetime | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Tagged:
        """PutObject with ``If-None-Match: *`` (``etag=None``) or ``If-Match: "<etag>"``; a 412 (or the
        404 AWS gives an ``If-Match`` on a missing key) is :class:`BlobConflict`."""
        from minio.helpers import genheaders

        validate_key(key)
        self._ensure_bucket()
        headers = genheaders(
            {f"x-amz-meta-{k}": v for k, v in (metadata or {}).items()},
            None,
            None,
            self._retention_of(retain_until),
            False,
        )
        headers["Content-Type"] = "application/octet-stream"
        if etag is None:
            headers["If-None-Match"] = "*"
        else:
            headers["If-Match"] = f'"{etag}"'
        try:
            # the SDK's put_object turns unknown headers into user metadata; its single-part PUT does not
            result = self._client._put_object(self.bucket, key, data, headers)
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code == "PreconditionFailed" or (etag is not None and code in ("NoSuchKey", "NoSuchObject")):
                raise BlobConflict(
                    f"put {key}: " + ("it already exists" if etag is None else f"its version is not {etag}")
                ) from exc
            raise _wrap(exc, f"put {key}") from exc
        return Tagged(result.etag or "", result.version_id)

    def get_tagged(self, key: str) -> Tagged:
        validate_key(key)
        self._ensure_bucket()
        response = None
        try:
            response = self._client.get_object(self.bucket, key)
            data = bytes(response.read())
            tag = str(response.headers.get("ETag", "")).strip('"')
            return Tagged(tag, response.headers.get("x-amz-version-id"), data)
        except Exception as exc:
            raise _wrap(exc, f"get {key}") from exc
        finally:
            if response is not None:
                response.close()
                response.release_conn()

    def _retention_of(self, retain_until: datetime | None) -> Any:
        if retain_until is None or self.object_lock == "off":
            return None
        from minio.commonconfig import COMPLIANCE, GOVERNANCE
        from minio.retention import Retention

        mode = COMPLIANCE if self.object_lock == "compliance" else GOVERNANCE
        return Retention(mode, retain_until.astimezone(UTC))

    def set_legal_hold(self, key: str, on: bool) -> bool:
        """Set (``on``) or clear the S3 legal hold on every stored version of ``key``; False when the
        lock is off (nothing to set)."""
        validate_key(key)
        if self.object_lock == "off":
            return False
        self._ensure_bucket()
        try:
            for version in self._versions(key):
                if on:
                    self._client.enable_object_legal_hold(self.bucket, key, version_id=version)
                else:
                    self._client.disable_object_legal_hold(self.bucket, key, version_id=version)
        except Exception as exc:
            raise _wrap(exc, f"legal hold {key}") from exc
        return True

    def lock_reason(self, key: str) -> str | None:
        """Why deleting ``key`` would be refused now (a legal hold, retention until a date), or None."""
        validate_key(key)
        if self.object_lock == "off":
            return None
        self._ensure_bucket()
        now = datetime.now(UTC)
        try:
            for version in self._versions(key):
                if self._client.is_object_legal_hold_enabled(self.bucket, key, version_id=version):
                    return "under S3 legal hold"
                retention = self._retention(key, version)
                if retention is not None and retention.retain_until_date is not None:
                    until = _aware(retention.retain_until_date, key)
                    if until > now:
                        return f"retained ({str(retention.mode).lower()}) until {until.isoformat()}"
        except Exception as exc:
            raise _wrap(exc, f"lock state {key}") from exc
        return None

    def _retention(self, key: str, version: str | None) -> Any:
        from minio.error import S3Error

        try:
            return self._client.get_object_retention(self.bucket, key, version_id=version)
        except S3Error as exc:  # an object written without retention has no configuration
            if exc.code in ("NoSuchObjectLockConfiguration", "ObjectLockConfigurationNotFoundError"):
                return None
            raise

    def versions(self, key: str) -> list[str]:
        """The version ids of ``key`` that hold bytes (no delete markers), newest first; [] without versions."""
        validate_key(key)
        if not self.versioned:
            return []
        self._ensure_bucket()
        try:
            return [v for v in self._versions(key) if v]
        except Exception as exc:
            raise _wrap(exc, f"versions of {key}") from exc

    def _versions(self, key: str) -> list[str | None]:
        """Every stored version of ``key`` (on a locking bucket, which is always versioned)."""
        return [
            obj.version_id
            for obj in self._client.list_objects(self.bucket, prefix=key, include_version=True)
            if obj.object_name == key and not obj.is_delete_marker
        ]

    def get(
        self, key: str, *, offset: int = 0, length: int | None = None, version_id: str | None = None
    ) -> bytes:
        validate_key(key)
        _check_range(offset, length)
        if length == 0:
            self._stat(key)  # still report a missing key
            return b""
        self._ensure_bucket()
        response = None
        try:
            response = self._client.get_object(
                self.bucket,
                key,
                offset=offset,
                length=length or 0,
                version_id=version_id if self.versioned else None,
            )
            return bytes(response.read())
        except Exception as exc:
            if getattr(exc, "code", None) == "InvalidRange" and self._stat(key) == 0:
                return b""
            raise _wrap(exc, f"get {key}") from exc
        finally:
            if response is not None:
                response.close()
                response.release_conn()

    def _stat(self, key: str) -> int:
        return self.stat(key).size

    def stat(self, key: str) -> BlobInfo:
        validate_key(key)
        self._ensure_bucket()
        try:
            obj = self._client.stat_object(self.bucket, key)
        except Exception as exc:
            raise _wrap(exc, f"stat {key}") from exc
        return BlobInfo(key, int(obj.size or 0), _aware(obj.last_modified, key))

    def delete(self, key: str) -> None:
        validate_key(key)
        self._ensure_bucket()
        try:
            if self.object_lock == "off":
                self._client.remove_object(self.bucket, key)
                return
            # a locking bucket is versioned: a plain DELETE only hides the bytes behind a marker, so
            # delete each version, which the lock refuses while it holds
            for version in self._versions(key):
                self._client.remove_object(self.bucket, key, version_id=version)
        except Exception as exc:
            wrapped = _wrap(exc, f"delete {key}")
            if isinstance(wrapped, BlobNotFound):
                return
            # the refusal's code differs by server (AWS: AccessDenied, MinIO: InvalidRequest "WORM protected")
            reason = self.lock_reason(key)
            if reason is not None:
                raise BlobLocked(f"delete {key}: {reason}") from exc
            raise wrapped from exc

    def exists(self, key: str) -> bool:
        try:
            self._stat(validate_key(key))
        except BlobNotFound:
            return False
        return True

    def list(self, prefix: str = "") -> Iterator[str]:
        self._ensure_bucket()
        try:
            names = [
                obj.object_name
                for obj in self._client.list_objects(self.bucket, prefix=prefix, recursive=True)
            ]
        except Exception as exc:
            raise _wrap(exc, f"list {prefix}") from exc
        return iter(sorted(name for name in names if name is not None))

    def list_info(self, prefix: str = "") -> Iterator[BlobInfo]:
        self._ensure_bucket()
        try:
            infos = [
                BlobInfo(obj.object_name, int(obj.size or 0), _aware(obj.last_modified, obj.object_name))
                for obj in self._client.list_objects(self.bucket, prefix=prefix, recursive=True)
                if obj.object_name is not None
            ]
        except BlobStoreError:
            raise
        except Exception as exc:
            raise _wrap(exc, f"list {prefix}") from exc
        return iter(sorted(infos, key=lambda info: info.key))


def _aware(moment: datetime | None, key: str) -> datetime:
    if moment is None:  # every S3 listing and HEAD carries Last-Modified; refuse to guess an age
        raise BlobStoreError(f"{key}: the server gave no last-modified time")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _wrap(exc: Exception, what: str) -> BlobStoreError:
    """Translate a minio / urllib3 error into the blackbox error tree."""
    if isinstance(exc, BlobStoreError):
        return exc
    code = getattr(exc, "code", None)
    if code in ("NoSuchKey", "NoSuchBucket", "NoSuchObject", "ResourceNotFound"):
        return BlobNotFound(f"{what}: {code}")
    return BlobStoreError(f"{what}: {type(exc).__name__}: {exc}")


def open_blob_store(settings: BlackboxSettings) -> BlobStore:
    """The blob store the settings name: ``local`` (``resolved_blob_dir``) or ``s3`` (MinIO/S3)."""
    if settings.blob == "s3":
        return S3BlobStore.from_settings(settings)
    return LocalBlobStore(settings.resolved_blob_dir)
