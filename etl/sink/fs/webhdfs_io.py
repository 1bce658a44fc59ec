"""The bytes of WebHDFS files: the streamed upload (CREATE's second step) and the ranged reader.

An upload is never sent twice: a failed one fails the write, and the task that retries it
writes a new temp file. A read is one OPEN (offset, length) per buffer refill, retried by
the filesystem as an idempotent call.
"""
from __future__ import annotations

import io
import queue
import threading
import time
from typing import Callable, Iterator

import requests

from etl.config import WarehouseConfig
from etl.errors import WarehouseError, WarehouseUnavailable
from etl.sink.fs.webhdfs_client import auth_hint, remote_error

UPLOAD_CHUNK_BYTES = 1 << 20  # bytes handed to the upload thread at a time
UPLOAD_QUEUE_CHUNKS = 4  # chunks in flight: bounds an upload's memory to about 5 MiB
READ_BUFFER_BYTES = 1 << 20


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
    the upload ends with what was sent, and the partial file stays (on HDFS as with a local
    file) for the caller to delete.
    """

    def __init__(self, client, warehouse: WarehouseConfig, path: str, location: str):
        super().__init__()
        self.path = path
        self._client = client  # the HdfsCLI client whose NameNode gave `location`
        self._warehouse = warehouse
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
        """Stop uploading, and settle the upload before returning, so that the caller's delete
        of the file is final. Never raises.

        The body is ended with what was already sent (the bytes not yet handed over are dropped),
        and the DataNode's answer awaited, for at most [warehouse] timeout_seconds: the file is
        then complete, under its temp name, for the caller to delete. Cutting the connection
        mid-body instead left the DataNode to create the file whenever it got to the request,
        which on a real HDFS came after the caller's delete on 14 of 30 aborts: a temp file left
        behind. Only an upload that cannot be ended in that time is cut."""
        if self.closed:
            return
        self._aborted = True
        self._pending.clear()
        deadline = time.monotonic() + self._warehouse.timeout_seconds
        if not self._put_before(_END, deadline):
            self._cut()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        super().close()

    def _put_before(self, item, deadline: float) -> bool:
        while self._thread.is_alive() and time.monotonic() < deadline:
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return not self._thread.is_alive()  # an upload that already ended needs nothing more

    def _cut(self) -> None:
        while True:  # make room if the queue is full, then tell the upload thread to stop
            try:
                self._queue.put_nowait(_ABORT)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    pass

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        try:  # dropped without close(): never finish, nor wait for, a file nobody closed
            if not self.closed:
                self._aborted = True
                self._cut()
                super().close()
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
            response = self._client._request(method="PUT", url=self._location, data=self._chunks())
        except _UploadAborted:
            return
        except requests.exceptions.RequestException as exc:
            self._error = WarehouseUnavailable(
                f"{what} failed: {exc}; the file is incomplete. CREATE is never sent twice: this write fails, and "
                f"its retry starts over with a new temp file (incomplete temp files are deleted or swept)")
            return
        except BaseException as exc:  # noqa: BLE001 -- reported to the writer, never lost in the thread
            self._error = WarehouseError(f"{what} failed: {type(exc).__name__}: {exc}")
            return
        with response:
            if not response.ok:
                self._error = remote_error(response, what, self.path, auth_hint(self._warehouse))


class WebHdfsReader(io.RawIOBase):
    """Random access to an HDFS file of known size: each read is one OPEN (offset, length),
    sent by `read_range(path, offset, length)` (the filesystem's, which retries it)."""

    def __init__(self, read_range: Callable[[str, int, int], bytes], path: str, size: int):
        super().__init__()
        self.path, self._read_range, self._size, self._pos = path, read_range, size, 0

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
        data = self._read_range(self.path, self._pos, length)
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)
