"""The HDFS backend of the warehouse filesystem, over WebHDFS (webhdfs:// and swebhdfs://).

Same contract as etl.sink.fs.LocalFileSystem. Built on HdfsCLI (the `hdfs` package) for the
transport: its InsecureClient (simple auth, `user.name`) or KerberosClient (SPNEGO), NameNode
HA failover, path quoting and timeouts. The operations are sent as raw WebHDFS calls, because
the outcome of each is read here, from the Hadoop WebHDFS REST semantics:

- CREATE is two steps: the NameNode answers 307 with a DataNode URL, and the bytes go there.
  It is sent with overwrite=false; open_write streams the bytes while the caller writes them,
  from a background thread, and close() returns only once the DataNode confirmed the file.
- RENAME answers {"boolean": false}, not an error, when the destination exists or the source
  is missing; the two are told apart by looking at both paths.
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
"""
from __future__ import annotations

import io
import logging
import posixpath
import queue
import threading
from typing import Callable, Iterator, TypeVar

import requests
from hdfs import InsecureClient
from hdfs.util import HdfsError

from etl.config import WarehouseConfig
from etl.errors import RETRYABLE_OS_ERRORS, ConfigError, WarehouseError
from etl.sink.fs import FileInfo, PathExists, PathNotFound
from etl.retry import retry_idempotent

T = TypeVar("T")
log = logging.getLogger(__name__)


class NameNodeBusy(WarehouseError):
    """The NameNode answered RetriableException or StandbyException: it did not run the call."""


class _RenameNotApplied(WarehouseError):
    """A RENAME whose answer was lost did not happen: the source is there, the destination not."""


# RemoteException names after which the call was not executed and may be sent again.
RETRYABLE_REMOTE_EXCEPTIONS = ("RetriableException", "StandbyException")
# Failures after which an idempotent call may simply be sent again.
RETRYABLE_WEBHDFS_ERRORS = (
    requests.exceptions.ConnectionError,  # refused, reset, dropped; includes ConnectTimeout
    requests.exceptions.Timeout,  # no answer within timeout_seconds
    requests.exceptions.ChunkedEncodingError,  # the answer was cut off mid-body
    NameNodeBusy,
) + RETRYABLE_OS_ERRORS
_DENIED_EXCEPTIONS = ("AccessControlException", "SecurityException", "AuthorizationException")

# HdfsCLI's raw endpoint per WebHDFS operation: the call is sent as it is and the response
# comes back unread (strict=False), except Retriable/Standby, which it raises after failover.
_ENDPOINTS = {
    "GETFILESTATUS": "_get_file_status", "LISTSTATUS": "_list_status", "MKDIRS": "_mkdirs",
    "CREATE": "_create", "OPEN": "_open", "RENAME": "_rename", "DELETE": "_delete",
}
UPLOAD_CHUNK_BYTES = 1 << 20  # bytes handed to the upload thread at a time
UPLOAD_QUEUE_CHUNKS = 4  # chunks in flight: bounds an upload's memory to about 5 MiB
READ_BUFFER_BYTES = 1 << 20


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
    def open_write(self, path: str) -> "WebHdfsUpload":
        """Start creating `path` (parents included); PathExists if it is already there.
        Not retried: any failure fails the write. The file is complete once close() returns."""
        path = _checked(path)
        if self._status(path) is not None:
            raise PathExists(f"cannot create {path}: it already exists on HDFS; it was left as it is")
        what = f"CREATE {path}"
        try:
            response = self._send("CREATE", path, overwrite="false")
        except RETRYABLE_WEBHDFS_ERRORS as exc:
            raise WarehouseError(f"{what} failed at the NameNode {self.warehouse.namenode_urls} ({exc}); CREATE "
                                 f"is never sent twice, so this write fails and its retry starts over with a new "
                                 f"temp file") from exc
        if response.status_code != 307 or "location" not in response.headers:
            if not response.ok:
                self._fail(response, what, path)
            raise WarehouseError(f"{what}: expected a 307 redirect to a DataNode, got HTTP {response.status_code}; "
                                 f"is {self.warehouse.namenode_urls} a WebHDFS NameNode (not HttpFS)?")
        return WebHdfsUpload(self, path, response.headers["location"])

    def open_read(self, path: str) -> io.BufferedReader:
        """A seekable reader; each read is one OPEN with offset and length (retried)."""
        path = _checked(path)
        status = self._status(path)
        if status is None:
            raise PathNotFound(f"cannot read {path}: it does not exist on HDFS")
        if status["type"] != "FILE":
            raise WarehouseError(f"cannot read {path}: it is a {status['type'].lower()}, not a file")
        return io.BufferedReader(_WebHdfsReader(self, path, int(status["length"])), READ_BUFFER_BYTES)

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Publish src as dst: True if this call did it, False if dst already existed."""
        src, dst = _checked(src), _checked(dst)
        what = f"RENAME {src} to {dst}"

        def attempt() -> bool:
            try:
                response = self._send("RENAME", src, destination=dst)
            except RETRYABLE_WEBHDFS_ERRORS as exc:
                return self._rename_outcome_from_state(src, dst, exc)
            if not response.ok:
                self._fail(response, what, src)
            if self._json(response, what).get("boolean") is True:
                return True
            return self._rename_refused(src, dst)

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
        return self._idempotent_json("DELETE", path, recursive="false").get("boolean") is True

    def makedirs(self, path: str) -> None:
        path = _checked(path)
        if self._idempotent_json("MKDIRS", path).get("boolean") is not True:
            raise WarehouseError(f"MKDIRS {path}: the NameNode answered false; check that no file is in the way")

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
        src_there = self._status(src) is not None
        dst_there = self._status(dst) is not None
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
            return self._idempotent_json("GETFILESTATUS", path)["FileStatus"]
        except PathNotFound:
            return None

    def _list(self, folder: str) -> list[dict]:
        """The FileStatus of each entry of `folder`; [] when it does not exist (retried)."""
        try:
            entries = self._idempotent_json("LISTSTATUS", folder)["FileStatuses"]["FileStatus"]
        except PathNotFound:
            return []
        if len(entries) == 1 and entries[0]["pathSuffix"] == "" and entries[0]["type"] == "FILE":
            raise WarehouseError(f"cannot list {folder}: it is a file, not a folder")
        return entries

    def _read_range(self, path: str, offset: int, length: int) -> bytes:
        what = f"OPEN {path} at {offset} for {length} bytes"

        def call() -> bytes:
            response = self._send("OPEN", path, offset=offset, length=length)
            with response:
                if not response.ok:
                    self._fail(response, what, path)
                return response.content

        return self._idempotent(what, call)

    def _idempotent_json(self, op: str, path: str, **params) -> dict:
        what = f"{op} {path}"

        def call() -> dict:
            response = self._send(op, path, **params)
            if not response.ok:
                self._fail(response, what, path)
            return self._json(response, what)

        return self._idempotent(what, call)

    def _idempotent(self, what: str, call: Callable[[], T]) -> T:
        policy = self.warehouse.retry
        try:
            return retry_idempotent(policy, RETRYABLE_WEBHDFS_ERRORS, what, call)
        except RETRYABLE_WEBHDFS_ERRORS as exc:
            raise WarehouseError(f"{what} failed {policy.attempts} times, the last time with: {exc}. Check that "
                                 f"WebHDFS at {self.warehouse.namenode_urls} is up and reachable from this host, "
                                 f"then run again") from exc

    def _send(self, op: str, path: str, **params) -> requests.Response:
        """One WebHDFS call through HdfsCLI (auth, HA failover, quoting), its answer unread."""
        endpoint = getattr(self.client, _ENDPOINTS[op])
        try:
            return endpoint(path, strict=False, **params)
        except HdfsError as exc:  # HdfsCLI raises these two kinds itself, even with strict=False
            if exc.exception in RETRYABLE_REMOTE_EXCEPTIONS:
                raise NameNodeBusy(f"{op} {path}: the NameNode answered {exc.exception} ({exc.message}); "
                                   f"it did not run the call") from exc
            raise WarehouseError(f"{op} {path}: {exc.message} {self._auth_hint()}") from exc

    def _fail(self, response: requests.Response, what: str, path: str):
        """Raise the error a non-2xx WebHDFS answer stands for."""
        raise remote_error(response, what, path, self._auth_hint())

    @staticmethod
    def _json(response: requests.Response, what: str) -> dict:
        try:
            return response.json()
        except ValueError as exc:
            raise WarehouseError(f"{what}: the answer (HTTP {response.status_code}) is not WebHDFS JSON: "
                                 f"{response.text[:200]!r}; is the url's host:port the NameNode's HTTP "
                                 f"address?") from exc

    def _auth_hint(self) -> str:
        if self.warehouse.auth == "kerberos":
            return ("Check the Kerberos ticket (kinit, or the keytab of the Spark job) and that its principal may "
                    "write the warehouse folder")
        return f"Check [warehouse] user ({self.warehouse.user!r}) and the HDFS permissions of the warehouse folder"


def remote_error(response: requests.Response, what: str, path: str, auth_hint: str) -> WarehouseError:
    """The WarehouseError for a non-2xx answer, from its RemoteException JSON."""
    name, message = _remote_exception(response)
    if name in RETRYABLE_REMOTE_EXCEPTIONS:
        return NameNodeBusy(f"{what}: the NameNode answered {name} ({message}); it did not run the call")
    if name == "FileNotFoundException" or (not name and response.status_code == 404):
        return PathNotFound(f"{what}: {path} does not exist ({message})")
    if name == "FileAlreadyExistsException":
        return PathExists(f"{what}: {path} already exists ({message}); it was left as it is")
    if name in _DENIED_EXCEPTIONS or response.status_code == 401:
        return WarehouseError(f"{what}: permission denied ({name or 'HTTP 401'}: {message}). {auth_hint}")
    if name == "SafeModeException":
        return WarehouseError(f"{what}: the NameNode is in safe mode ({message}); run again once it has left "
                              f"safe mode (hdfs dfsadmin -safemode get)")
    return WarehouseError(f"{what}: WebHDFS answered HTTP {response.status_code} {name}: {message}")


def _remote_exception(response: requests.Response) -> tuple[str, str]:
    try:
        remote = response.json()["RemoteException"]
        return str(remote.get("exception") or ""), str(remote.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", f"HTTP {response.status_code} {response.reason}: {response.text[:200]!r}"


def make_client(warehouse: WarehouseConfig):
    """The HdfsCLI client for the config: KerberosClient when auth = kerberos, else InsecureClient."""
    if warehouse.auth == "kerberos":
        try:
            from hdfs.ext.kerberos import KerberosClient  # imports requests_kerberos
        except ImportError as exc:
            raise ConfigError(f"[warehouse] auth = kerberos needs the requests-kerberos package, which is not "
                              f"installed here ({exc}); install the ETL with its kerberos extra: "
                              f"pip install 'kafka-hive-etl[kerberos]', on the driver and the executors") from exc
        extra = {"principal": warehouse.kerberos_principal} if warehouse.kerberos_principal else {}
        return KerberosClient(warehouse.namenode_urls, mutual_auth="OPTIONAL", timeout=warehouse.timeout_seconds,
                              session=_session(), **extra)
    try:
        return InsecureClient(warehouse.namenode_urls, user=warehouse.user, timeout=warehouse.timeout_seconds,
                              session=_session())
    except (KeyError, OSError) as exc:  # getpass found no user name for this process
        raise ConfigError(f"[warehouse] user is not set and this process has no user name ({exc}); "
                          f"set [warehouse] user to the HDFS user the ETL writes as") from exc


def _session() -> requests.Session:
    session = requests.Session()
    # Clusters with dfs.webhdfs.rest-csrf.enabled refuse PUT and DELETE without this header;
    # the others ignore it.
    session.headers["X-XSRF-HEADER"] = "true"
    return session


def _checked(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise WarehouseError(f"HDFS path {path!r} is not absolute; warehouse paths start with '/'")
    return "/" + posixpath.normpath(path).lstrip("/")


_END = object()
_ABORT = object()


class _UploadAborted(Exception):
    pass


class WebHdfsUpload(io.RawIOBase):
    """A file being created on HDFS: CREATE's second step, streamed while it is written.

    The NameNode already answered with a DataNode URL. A background thread PUTs to it with a
    chunked body fed from a small queue, so memory stays bounded however large the file. A
    failed upload shows at the next write(), or at close(), which returns only once the
    DataNode answered 201 Created. Leaving a `with` block by an exception aborts instead:
    the upload stops, and the partial file stays (on HDFS as with a local file) for the
    caller to delete.
    """

    def __init__(self, fs: WebHdfsFileSystem, path: str, location: str):
        super().__init__()
        self.path = path
        self._fs = fs
        self._location = location
        self._queue: queue.Queue = queue.Queue(maxsize=UPLOAD_QUEUE_CHUNKS)
        self._pending = bytearray()
        self._written = 0
        self._error: BaseException | None = None
        self._aborted = False
        self._thread = threading.Thread(target=self._upload, name=f"webhdfs-upload {path}", daemon=True)
        self._thread.start()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.closed:
            raise ValueError(f"write to closed upload of {self.path}")
        self._raise_if_failed()
        size = memoryview(data).nbytes
        self._pending += data
        self._written += size
        if len(self._pending) >= UPLOAD_CHUNK_BYTES:
            self._hand_over(bytes(self._pending))
            self._pending.clear()
        return size

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        """Send the rest and wait for the DataNode's answer; WarehouseError if it failed."""
        if self.closed:
            return
        try:
            if not self._aborted:
                if self._pending:
                    self._hand_over(bytes(self._pending))
                    self._pending.clear()
                self._hand_over(_END)
                self._thread.join()
                self._raise_if_failed()
        finally:
            super().close()

    def abort(self) -> None:
        """Stop uploading without finishing the file. Never raises."""
        if self.closed:
            return
        self._aborted = True
        while True:  # make room if the queue is full, then tell the upload thread to stop
            try:
                self._queue.put_nowait(_ABORT)
                break
            except queue.Full:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    pass
        self._thread.join(self._fs.warehouse.timeout_seconds)
        super().close()

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            self.abort()  # dropped without close(): never finish a file nobody closed
        except Exception:
            pass

    def _hand_over(self, item) -> None:
        while True:
            self._raise_if_failed()
            if not self._thread.is_alive():
                raise WarehouseError(f"upload of {self.path} stopped without an answer from the DataNode")
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _chunks(self) -> Iterator[bytes]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if item is _ABORT:
                raise _UploadAborted()
            yield item

    def _upload(self) -> None:
        what = f"CREATE {self.path} (upload to the DataNode)"
        try:
            response = self._fs.client._request(method="PUT", url=self._location, data=self._chunks())
        except _UploadAborted:
            return
        except requests.exceptions.RequestException as exc:
            self._error = WarehouseError(f"{what} failed: {exc}; the file is incomplete. CREATE is never sent "
                                         f"twice: this write fails, and its retry starts over with a new temp "
                                         f"file (incomplete temp files are deleted or swept)")
            return
        except BaseException as exc:  # noqa: BLE001 -- reported to the writer, never lost in the thread
            self._error = WarehouseError(f"{what} failed: {type(exc).__name__}: {exc}")
            return
        with response:
            if not response.ok:
                self._error = remote_error(response, what, self.path, self._fs._auth_hint())


class _WebHdfsReader(io.RawIOBase):
    """Random access to an HDFS file of known size: each read is one OPEN (offset, length)."""

    def __init__(self, fs: WebHdfsFileSystem, path: str, size: int):
        super().__init__()
        self.path, self._fs, self._size, self._pos = path, fs, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset} in {self.path}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:
        length = min(len(buffer), self._size - self._pos)
        if length <= 0:
            return 0
        data = self._fs._read_range(self.path, self._pos, length)
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)
