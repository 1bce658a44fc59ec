"""The HDFS backend of the warehouse filesystem, over WebHDFS (webhdfs:// and swebhdfs://).

Same contract as etl.sink.fs.LocalFileSystem. Built on HdfsCLI (the `hdfs` package) for the
transport: its InsecureClient (simple auth, `user.name`) or KerberosClient (SPNEGO), NameNode
HA failover, path quoting and timeouts, through its public API except for CREATE (why:
webhdfs_client). What each outcome means is read here, from the Hadoop WebHDFS REST semantics:

- CREATE is two steps: the NameNode answers 307 with a DataNode URL, and the bytes go there.
  It is sent with overwrite=false; open_write streams the bytes while the caller writes them,
  from a background thread, and close() returns only once the DataNode confirmed the file.
- RENAME answers {"boolean": false}, not an error, when the destination exists or the source
  is missing (HdfsCLI's rename() raises for it); the two are told apart by looking at both paths.
- Errors come as RemoteException JSON: FileNotFoundException, FileAlreadyExistsException,
  AccessControlException, and RetriableException/StandbyException (the NameNode did not run
  the call: starting up, or standby during a failover).

Only idempotent calls are retried (GETFILESTATUS, LISTSTATUS, OPEN, MKDIRS, and DELETE, used
on temp files only), on the failures listed in RETRYABLE_WEBHDFS_ERRORS. CREATE is never sent
again: a failed upload fails the write, and the task that retries it writes a new temp file.
RENAME is never sent again blindly either: when its answer is lost, the state of both paths
decides (destination there and source gone: it was done; source still there and destination
absent: it was not applied, and only then is it sent again).

Picklable, and cheap to build: every Spark task builds its own from the WarehouseConfig.
The client, auth and the map from an answer to an error are in webhdfs_client; the bytes of
an upload or of a read in webhdfs_io.
"""
from __future__ import annotations

import io
import logging
import posixpath
from typing import Callable, Iterator, TypeVar

import requests
from hdfs.util import HdfsError

from etl.config import WarehouseConfig
from etl.errors import WarehouseError, WarehouseUnavailable
from etl.retry import retry_idempotent
from etl.sink.fs.base import FileInfo, PathExists, PathNotFound
from etl.sink.fs.webhdfs_client import (RETRYABLE_WEBHDFS_ERRORS, NameNodeBusy, auth_hint, call, hdfs_error,
                                        is_rename_refused, make_client, remote_error, start_create)
from etl.sink.fs.webhdfs_io import READ_BUFFER_BYTES, WebHdfsReader, WebHdfsUpload

T = TypeVar("T")
log = logging.getLogger(__name__)


class _RenameNotApplied(WarehouseError):
    """A RENAME whose answer was lost did not happen: the source is there, the destination not."""


class WebHdfsFileSystem:
    """The warehouse filesystem on HDFS through WebHDFS. Paths are absolute HDFS paths."""

    scheme = "webhdfs"

    def __init__(self, warehouse: WarehouseConfig):
        if not warehouse.is_webhdfs:
            raise WarehouseError(f"WebHdfsFileSystem needs a webhdfs:// or swebhdfs:// url, not {warehouse.url!r}")
        self.warehouse = warehouse
        self.scheme = warehouse.scheme  # webhdfs or swebhdfs
        self._client = None
        self.client  # noqa: B018 -- built now: a missing Kerberos package fails here, on the driver

    def __getstate__(self) -> dict:
        return {"warehouse": self.warehouse}  # the HTTP session is rebuilt where it is unpickled

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["warehouse"])

    def __repr__(self) -> str:
        return f"WebHdfsFileSystem({self.warehouse.url!r})"

    @property
    def client(self):
        """The HdfsCLI client (InsecureClient or KerberosClient)."""
        if self._client is None:
            self._client = make_client(self.warehouse)
        return self._client

    # -- the contract ---------------------------------------------------------------------
    def open_write(self, path: str) -> WebHdfsUpload:
        """Start creating `path` (parents included); PathExists if it is already there.
        Not retried: any failure fails the write. The file is complete once close() returns."""
        path = _checked(path)
        if self._status(path) is not None:
            raise PathExists(f"cannot create {path}: it already exists on HDFS; it was left as it is")
        what = f"CREATE {path}"
        try:
            response = start_create(self.client, self.warehouse, path)
        except RETRYABLE_WEBHDFS_ERRORS as exc:
            raise WarehouseUnavailable(
                f"{what} failed at the NameNode {self.warehouse.namenode_urls} ({exc}); CREATE is never sent "
                f"twice, so this write fails and its retry starts over with a new temp file") from exc
        if response.status_code != 307 or "location" not in response.headers:
            if not response.ok:
                self._fail(response, what, path)
            raise WarehouseError(f"{what}: expected a 307 redirect to a DataNode, got HTTP {response.status_code}; "
                                 f"is {self.warehouse.namenode_urls} a WebHDFS NameNode (not HttpFS)?")
        return WebHdfsUpload(self.client, self.warehouse, path, response.headers["location"])

    def open_read(self, path: str) -> io.BufferedReader:
        """A seekable reader; each read is one OPEN with offset and length (retried)."""
        path = _checked(path)
        status = self._status(path)
        if status is None:
            raise PathNotFound(f"cannot read {path}: it does not exist on HDFS")
        if status["type"] != "FILE":
            raise WarehouseError(f"cannot read {path}: it is a {status['type'].lower()}, not a file")
        return io.BufferedReader(WebHdfsReader(self._read_range, path, int(status["length"])), READ_BUFFER_BYTES)

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Publish src as dst: True if this call did it, False if dst already existed."""
        src, dst = _checked(src), _checked(dst)
        what = f"RENAME {src} to {dst}"

        def attempt() -> bool:
            try:
                self.client.rename(src, dst)
            except HdfsError as exc:
                if is_rename_refused(exc):
                    return self._rename_refused(src, dst)
                error = hdfs_error(exc, what, src, auth_hint(self.warehouse))
                if not isinstance(error, NameNodeBusy):
                    raise error from exc
                return self._rename_outcome_from_state(src, dst, error)
            except RETRYABLE_WEBHDFS_ERRORS as exc:
                return self._rename_outcome_from_state(src, dst, exc)
            return True

        try:
            return retry_idempotent(self.warehouse.retry, (_RenameNotApplied,), what, attempt)
        except _RenameNotApplied as exc:
            raise WarehouseError(f"{what}: not applied after {self.warehouse.retry.attempts} attempts whose answers "
                                 f"were lost ({exc.__cause__}); {src} is still there and {dst} is absent. Check the "
                                 f"NameNode at {self.warehouse.namenode_urls} and run again") from exc

    def exists(self, path: str) -> bool:
        return self._status(_checked(path)) is not None

    def info(self, path: str) -> FileInfo | None:
        path = _checked(path)
        status = self._status(path)
        if status is None:
            return None
        return FileInfo(path, int(status["length"]), status["modificationTime"] / 1000.0)

    def list_dir(self, path: str) -> list[str]:
        """Names in the folder `path`; [] when it does not exist."""
        return sorted(entry["pathSuffix"] for entry in self._list(_checked(path)))

    def list_files(self, path: str) -> list[FileInfo]:
        folder = _checked(path)
        return sorted((FileInfo(posixpath.join(folder, entry["pathSuffix"]), int(entry["length"]),
                                entry["modificationTime"] / 1000.0)
                       for entry in self._list(folder) if entry["type"] == "FILE"), key=lambda info: info.path)

    def walk_files(self, path: str) -> Iterator[str]:
        folder = _checked(path)
        for entry in sorted(self._list(folder), key=lambda e: e["pathSuffix"]):
            child = posixpath.join(folder, entry["pathSuffix"])
            if entry["type"] == "DIRECTORY":
                yield from self.walk_files(child)
            else:
                yield child

    def delete(self, path: str) -> bool:
        """Remove a file: True if it was there. Refuses folders, as the local backend does."""
        path = _checked(path)
        status = self._status(path)
        if status is None:
            return False
        if status["type"] == "DIRECTORY":
            raise WarehouseError(f"refusing to delete directory {path}")
        # Idempotent (the ETL deletes only temp files and files it owns): if a lost answer made
        # it run twice, the second says False, as if someone else had deleted the file.
        return self._public("DELETE", path, self.client.delete, path, recursive=False) is True

    def makedirs(self, path: str) -> None:
        path = _checked(path)
        self._public("MKDIRS", path, self.client.makedirs, path)
        # HdfsCLI's makedirs() drops WebHDFS's boolean answer: look at what is there instead.
        status = self._status(path)
        if status is None or status["type"] != "DIRECTORY":
            raise WarehouseError(f"MKDIRS {path}: the NameNode made no folder there; check that no file is in the way")

    # -- RENAME outcomes ------------------------------------------------------------------
    def _rename_refused(self, src: str, dst: str) -> bool:
        """WebHDFS said {"boolean": false}: dst exists, or src is missing, or dst's folder is."""
        status = self._status(dst)
        if status is not None:
            if status["type"] != "FILE":
                raise WarehouseError(f"cannot publish {src} as {dst}: {dst} is a {status['type'].lower()}; "
                                     f"move it out of the warehouse")
            return False
        if self._status(src) is None:
            raise WarehouseError(f"cannot publish {src} as {dst}: {src} does not exist and neither does {dst}; "
                                 f"the temp file was never written or another process removed it")
        folder = posixpath.dirname(dst)
        if self._status(folder) is None:
            raise WarehouseError(f"cannot publish {src} as {dst}: the folder {folder} does not exist")
        raise WarehouseError(f"WebHDFS refused to rename {src} to {dst} although the source exists and the "
                             f"destination does not; check the HDFS permissions on {folder}")

    def _rename_outcome_from_state(self, src: str, dst: str, cause: BaseException) -> bool:
        """The RENAME's answer was lost, or the NameNode did not run it: look at both paths.
        The source is looked at first: a RENAME still in flight then reads as
        'both there' (False, harmless) rather than 'neither there'."""
        log.warning("RENAME %s to %s: %s; deciding from the state of both paths", src, dst, cause)
        try:
            src_there = self._status(src) is not None
            dst_there = self._status(dst) is not None
        except WarehouseUnavailable as exc:
            raise WarehouseUnavailable(f"RENAME {src} to {dst}: no answer ({cause}), and the state of both paths "
                                       f"could not be read either: {exc}") from exc
        if dst_there:
            return not src_there  # src gone: it was applied; src still there: dst was someone else's
        if not src_there:
            raise WarehouseError(f"cannot publish {src} as {dst}: the answer to RENAME was lost ({cause}) and now "
                                 f"neither {src} nor {dst} exists; another process removed one of them")
        raise _RenameNotApplied(f"RENAME {src} to {dst} was not applied") from cause

    # -- calls ----------------------------------------------------------------------------
    def _status(self, path: str) -> dict | None:
        """The FileStatus of `path`, None if it does not exist (retried)."""
        try:
            return self._public("GETFILESTATUS", path, self.client.status, path)
        except PathNotFound:
            return None

    def _list(self, folder: str) -> list[dict]:
        """The FileStatus of each entry of `folder`; [] when it does not exist (retried)."""
        try:
            return [status for _, status in self._public("LISTSTATUS", folder, self.client.list, folder, status=True)]
        except PathNotFound:
            return []

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        what = f"OPEN {path} at {offset} for {length} bytes"

        def read() -> bytes:
            # In chunks, so that a connection cut mid-body raises requests' retryable errors.
            with self.client.read(path, offset=offset, length=length, chunk_size=READ_BUFFER_BYTES) as chunks:
                return b"".join(chunks)

        return self._idempotent(what, lambda: call(self.warehouse, what, path, read))

    def _public(self, op: str, path: str, method: Callable[..., T], *args, **kwargs) -> T:
        """One idempotent call of HdfsCLI's public API, retried (see webhdfs_client.call)."""
        what = f"{op} {path}"
        return self._idempotent(what, lambda: call(self.warehouse, what, path, method, *args, **kwargs))

    def _idempotent(self, what: str, call: Callable[[], T]) -> T:
        policy = self.warehouse.retry
        try:
            return retry_idempotent(policy, RETRYABLE_WEBHDFS_ERRORS, what, call)
        except RETRYABLE_WEBHDFS_ERRORS as exc:
            raise WarehouseUnavailable(
                f"{what} failed {policy.attempts} times, the last time with: {exc}. Check that WebHDFS at "
                f"{self.warehouse.namenode_urls} is up and reachable from this host, then run again") from exc

    def _fail(self, response: requests.Response, what: str, path: str):
        """Raise the error a non-2xx WebHDFS answer stands for."""
        raise remote_error(response, what, path, auth_hint(self.warehouse))


def _checked(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise WarehouseError(f"HDFS path {path!r} is not absolute; warehouse paths start with '/'")
    return "/" + posixpath.normpath(path).lstrip("/")
