"""A small WebHDFS server over a local folder, for tests: no HDFS can be installed here.

It follows the Hadoop WebHDFS REST spec for the operations the ETL uses, at
/webhdfs/v1/<path>?op=...:

- GETFILESTATUS, LISTSTATUS: FileStatus JSON; 404 FileNotFoundException when missing.
- MKDIRS: {"boolean": true}; FileAlreadyExistsException / ParentNotDirectoryException when a
  file is in the way.
- CREATE: step 1 (the "NameNode") answers 307 with a Location on this same server marked
  datanode=true; step 2 (the "DataNode") receives the bytes (Content-Length or chunked) and
  answers 201. With overwrite=false an existing path is 403 FileAlreadyExistsException. As on
  HDFS, the file exists (growing) while it is being written.
- OPEN: 307 to the "DataNode", which serves offset/length.
- RENAME: {"boolean": false} when the source is missing, the destination exists or its folder
  is missing; a destination that is a folder receives the source inside it, as HDFS does.
  Atomic: checked and done under one lock, with link+unlink for files.
- DELETE: {"boolean": true/false}; 403 PathIsNotEmptyDirectoryException without recursive.
Errors are RemoteException JSON with Hadoop's status codes (404 FileNotFoundException, 403
for other IOExceptions, 400 IllegalArgumentException).

Faults can be injected per operation and phase: drop the connection before running the
call, run it and then drop the connection (the answer is lost), or answer a RemoteException
such as StandbyException. Every request is logged, so tests can count what was sent.
"""
from __future__ import annotations

import json
import os
import posixpath
import shutil
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

PREFIX = "/webhdfs/v1"
_JAVA_CLASSES = {
    "FileNotFoundException": "java.io.FileNotFoundException",
    "FileAlreadyExistsException": "org.apache.hadoop.fs.FileAlreadyExistsException",
    "ParentNotDirectoryException": "org.apache.hadoop.fs.ParentNotDirectoryException",
    "PathIsNotEmptyDirectoryException": "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
    "IllegalArgumentException": "java.lang.IllegalArgumentException",
    "UnsupportedOperationException": "java.lang.UnsupportedOperationException",
    "StandbyException": "org.apache.hadoop.ipc.StandbyException",
    "RetriableException": "org.apache.hadoop.ipc.RetriableException",
    "AccessControlException": "org.apache.hadoop.security.AccessControlException",
    "IOException": "java.io.IOException",
}
_STATUS = {"FileNotFoundException": 404, "IllegalArgumentException": 400, "UnsupportedOperationException": 400}


class RemoteException(Exception):
    def __init__(self, exception: str, message: str, status: int | None = None):
        super().__init__(message)
        self.exception, self.message = exception, message
        self.status = status or _STATUS.get(exception, 403)  # Hadoop: other IOExceptions are 403

    def body(self) -> dict:
        return {"RemoteException": {"exception": self.exception, "message": self.message,
                                    "javaClassName": _JAVA_CLASSES.get(self.exception, "java.io.IOException")}}


@dataclass
class Fault:
    op: str  # GETFILESTATUS, LISTSTATUS, CREATE, RENAME, ...
    action: str  # "drop" | "drop_after" | "remote:<ExceptionName>"
    count: int = 1
    phase: str = "namenode"  # or "datanode" (step 2 of CREATE and OPEN)


@dataclass(frozen=True)
class Request:
    method: str
    op: str
    path: str
    phase: str
    params: dict


class WebHdfsTestServer:
    """Start with `with WebHdfsTestServer(root) as server:` or start()/stop()."""

    def __init__(self, root: Path, host: str = "127.0.0.1"):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.lock = threading.Lock()  # namespace changes: MKDIRS, CREATE, RENAME, DELETE
        self.requests: list[Request] = []
        self._faults: list[Fault] = []
        self._faults_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "WebHdfsTestServer":
        self._httpd = ThreadingHTTPServer((self.host, 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.webhdfs = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="webhdfs-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(10)
            self._httpd = None

    def __enter__(self) -> "WebHdfsTestServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def webhdfs_url(self, path: str = "/") -> str:
        return f"webhdfs://{self.host}:{self.port}{path}"

    def local_path(self, hdfs_path: str) -> Path:
        return self.root / hdfs_path.lstrip("/")

    # -- faults and the request log ---------------------------------------------------------
    def inject(self, op: str, action: str = "drop", count: int = 1, phase: str = "namenode") -> None:
        """The next `count` requests of `op` in `phase` get `action` (see Fault)."""
        if action not in ("drop", "drop_after") and not action.startswith("remote:"):
            raise ValueError(f"unknown fault action {action!r}")
        with self._faults_lock:
            self._faults.append(Fault(op.upper(), action, count, phase))

    def take_fault(self, op: str, phase: str) -> Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.op == op and fault.phase == phase and fault.count > 0:
                    fault.count -= 1
                    return fault
        return None

    def count(self, op: str, phase: str = "namenode") -> int:
        return sum(1 for r in list(self.requests) if r.op == op.upper() and r.phase == phase)

    # -- the namespace --------------------------------------------------------------------
    def resolve(self, hdfs_path: str) -> Path:
        normal = posixpath.normpath("/" + hdfs_path.lstrip("/"))
        if normal.startswith("//") or ".." in normal.split("/"):
            raise RemoteException("IllegalArgumentException", f"Invalid path name {hdfs_path}")
        return self.root / normal.lstrip("/")

    def file_status(self, local: Path, suffix: str) -> dict:
        st = local.stat()
        is_dir = local.is_dir()
        return {
            "accessTime": 0 if is_dir else int(st.st_atime * 1000), "blockSize": 0 if is_dir else 134217728,
            "childrenNum": len(os.listdir(local)) if is_dir else 0, "fileId": st.st_ino, "group": "supergroup",
            "length": 0 if is_dir else st.st_size, "modificationTime": int(st.st_mtime * 1000), "owner": "etl",
            "pathSuffix": suffix, "permission": "755" if is_dir else "644", "replication": 0 if is_dir else 1,
            "storagePolicy": 0, "type": "DIRECTORY" if is_dir else "FILE",
        }

    def check_parents(self, local: Path, hdfs_path: str) -> None:
        """ParentNotDirectoryException when some ancestor of `local` is a file."""
        for parent in reversed(local.parents):
            if parent == self.root or self.root not in parent.parents:
                continue
            if parent.exists() and not parent.is_dir():
                raise RemoteException("ParentNotDirectoryException",
                                      f"/{parent.relative_to(self.root)} (is not a directory)")

    def datanode_location(self, hdfs_path: str, params: dict) -> str:
        query = urlencode({**params, "datanode": "true"})
        return f"{self.http_url}{PREFIX}{quote(hdfs_path)}?{query}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "webhdfs-test-server"

    def log_message(self, format, *args) -> None:  # noqa: A002 -- quiet: pytest shows failures
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    @property
    def hdfs(self) -> WebHdfsTestServer:
        return self.server.webhdfs

    # -- dispatch -------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        self._body_read = False  # one handler serves all requests of a keep-alive connection
        url = urlsplit(self.path)
        if not (url.path == PREFIX or url.path.startswith(PREFIX + "/")):
            self._drain()
            return self._send_json(404, RemoteException("FileNotFoundException", f"no such endpoint {url.path}").body())
        path = "/" + unquote(url.path[len(PREFIX):]).lstrip("/")
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        op = params.get("op", "").upper()
        phase = "datanode" if params.get("datanode") == "true" else "namenode"
        self.hdfs.requests.append(Request(method, op, path, phase, params))
        fault = self.hdfs.take_fault(op, phase)
        if fault is not None and fault.action == "drop":
            return self._drop()
        if fault is not None and fault.action.startswith("remote:"):
            self._drain()
            name = fault.action.split(":", 1)[1]
            return self._send_json(403, RemoteException(name, f"injected {name} for {op} {path}").body())
        try:
            status, body, headers = self._run(method, op, path, params, phase)
        except RemoteException as exc:
            self._drain()
            status, body, headers = exc.status, exc.body(), {}
        except (ConnectionError, OSError):  # the client went away mid-body: nobody to answer
            return self._drop()
        if fault is not None and fault.action == "drop_after":
            return self._drop()
        if isinstance(body, bytes):
            self._send(status, body, "application/octet-stream", headers)
        else:
            self._send_json(status, body, headers)

    def _run(self, method: str, op: str, path: str, params: dict, phase: str):
        handlers = {
            ("GET", "GETFILESTATUS"): self._getfilestatus, ("GET", "LISTSTATUS"): self._liststatus,
            ("PUT", "MKDIRS"): self._mkdirs, ("PUT", "CREATE"): self._create, ("GET", "OPEN"): self._open,
            ("PUT", "RENAME"): self._rename, ("DELETE", "DELETE"): self._delete,
        }
        handler = handlers.get((method, op))
        if handler is None:
            known = {name for _, name in handlers}
            if op in known:
                raise RemoteException("IllegalArgumentException", f"Invalid operation {method} {op}", 400)
            raise RemoteException("IllegalArgumentException",
                                  f'Invalid value for webhdfs parameter "op": No enum constant {op}', 400)
        if op not in ("CREATE",):
            self._drain()
        return handler(path, self.hdfs.resolve(path), params, phase)

    # -- operations -----------------------------------------------------------------------
    def _getfilestatus(self, path, local, params, phase):
        if not local.exists():
            raise RemoteException("FileNotFoundException", f"File does not exist: {path}")
        return 200, {"FileStatus": self.hdfs.file_status(local, "")}, {}

    def _liststatus(self, path, local, params, phase):
        if not local.exists():
            raise RemoteException("FileNotFoundException", f"File {path} does not exist.")
        if not local.is_dir():
            return 200, {"FileStatuses": {"FileStatus": [self.hdfs.file_status(local, "")]}}, {}
        entries = []
        for name in sorted(os.listdir(local)):
            try:
                entries.append(self.hdfs.file_status(local / name, name))
            except FileNotFoundError:  # removed while listing
                continue
        return 200, {"FileStatuses": {"FileStatus": entries}}, {}

    def _mkdirs(self, path, local, params, phase):
        with self.hdfs.lock:
            self.hdfs.check_parents(local, path)
            if local.exists() and not local.is_dir():
                raise RemoteException("FileAlreadyExistsException", f"Path is not a directory: {path}")
            local.mkdir(parents=True, exist_ok=True)
        return 200, {"boolean": True}, {}

    def _create(self, path, local, params, phase):
        if phase == "namenode":  # step 1: the NameNode only picks a DataNode
            self._drain()
            if local.is_dir():
                raise RemoteException("FileAlreadyExistsException", f"{path} already exists as a directory")
            return 307, b"", {"Location": self.hdfs.datanode_location(path, params)}
        overwrite = params.get("overwrite", "false").lower() == "true"
        with self.hdfs.lock:
            self.hdfs.check_parents(local, path)
            if local.exists() and (not overwrite or local.is_dir()):
                raise RemoteException("FileAlreadyExistsException", f"{path} for client 127.0.0.1 already exists")
            local.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
            fd = os.open(local, flags, 0o644)
        with os.fdopen(fd, "wb") as out:  # visible while it grows, as an HDFS file under construction
            for chunk in self._body():
                out.write(chunk)
        return 201, b"", {"Location": f"hdfs://{self.hdfs.host}:{self.hdfs.port}{path}"}

    def _open(self, path, local, params, phase):
        if not local.exists():
            raise RemoteException("FileNotFoundException", f"File does not exist: {path}")
        if local.is_dir():
            raise RemoteException("FileNotFoundException", f"Path is not a file: {path}")
        if phase == "namenode":
            return 307, b"", {"Location": self.hdfs.datanode_location(path, params)}
        size = local.stat().st_size
        offset = int(params.get("offset", 0))
        if offset < 0 or (offset > 0 and offset >= size):
            raise RemoteException("IOException", f"Offset={offset} out of the range [0, {size}); OPEN, path={path}")
        length = int(params["length"]) if params.get("length") else size - offset
        with open(local, "rb") as f:
            f.seek(offset)
            return 200, f.read(length), {}

    def _rename(self, path, local, params, phase):
        destination = params.get("destination", "")
        if not destination.startswith("/"):
            raise RemoteException("IllegalArgumentException", f"Invalid value for webhdfs parameter "
                                                              f'"destination": {destination!r} is not absolute', 400)
        with self.hdfs.lock:
            return 200, {"boolean": self._rename_locked(local, self.hdfs.resolve(destination))}, {}

    def _rename_locked(self, src: Path, dst: Path) -> bool:
        if not src.exists() or src == self.hdfs.root:
            return False
        if dst.is_dir():  # HDFS moves the source into an existing folder
            dst = dst / src.name
        if dst.exists() or not dst.parent.is_dir() or src in dst.parents or dst == src:
            return False
        if src.is_dir():
            os.rename(src, dst)  # dst was checked absent under the lock
        else:
            os.link(src, dst)  # never replaces: EEXIST if dst appeared
            os.unlink(src)
        return True

    def _delete(self, path, local, params, phase):
        recursive = params.get("recursive", "false").lower() == "true"
        with self.hdfs.lock:
            if not local.exists() or local == self.hdfs.root:
                return 200, {"boolean": False}, {}
            if local.is_dir():
                if os.listdir(local) and not recursive:
                    raise RemoteException("PathIsNotEmptyDirectoryException",
                                          f"`{path} is non empty': Directory is not empty")
                shutil.rmtree(local)
            else:
                local.unlink()
        return 200, {"boolean": True}, {}

    # -- HTTP plumbing --------------------------------------------------------------------
    def _body(self):
        """The request body in pieces, from Content-Length or chunked transfer encoding."""
        if getattr(self, "_body_read", False):
            return
        self._body_read = True
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("client went away mid-body")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                yield self._read_exactly(size)
                self._read_exactly(2)
        else:
            remaining = int(self.headers.get("Content-Length") or 0)
            while remaining:
                piece = self.rfile.read(min(remaining, 1 << 20))
                if not piece:
                    raise ConnectionError("client went away mid-body")
                remaining -= len(piece)
                yield piece

    def _read_exactly(self, size: int) -> bytes:
        data = self.rfile.read(size)
        if len(data) != size:
            raise ConnectionError("client went away mid-chunk")
        return data

    def _drain(self) -> None:
        for _ in self._body():
            pass

    def _drop(self) -> None:
        """Close the connection without an answer, as a crashed or unreachable server would."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_json(self, status: int, body: dict, headers: dict | None = None) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", headers or {})

    def _send(self, status: int, body: bytes, content_type: str, headers: dict) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
