"""A Confluent Schema Registry test server. No real registry can be installed here (Confluent's
is not on Maven Central, Apicurio's cannot be put together from it, Karapace is not on PyPI:
docs/testing.md has the errors), and the ETL's Spark executors, other processes,
must reach one over TCP: this one answers Confluent's REST API, over real HTTP, for the calls
confluent-kafka's SchemaRegistryClient makes for its Avro and Protobuf serializers and
deserializers. Bodies are application/vnd.schemaregistry.v1+json; errors are Confluent's
{"error_code", "message"} with its codes. What it keeps, and how ids and versions are given,
is schema_registry_store.py.

- POST /subjects/{s}/versions registers: {"id", "version"}; 422 42201 for an invalid schema
  or a reference that does not exist.
- POST /subjects/{s} looks a schema up in a subject (ProtobufSerializer does, for the version
  of each reference): subject, id, version, schema; 404 40401 no subject, 40403 not in it.
- GET /schemas/ids/{id}: {"schema", "schemaType" (not for Avro), "references"}; 404 40403.
- GET /subjects/{s}/versions/{n|latest}: subject, id, version, schema; 404 40401, 40402; 422
  42202 for a version that is not one.
- GET /subjects, GET /subjects/{s}/versions, GET /schemas/types, DELETE /subjects/{s}
  (?permanent=true after a soft delete).
- GET /_test/requests: test-only, the request log as JSON, for a server in another process.
Any other path is 404 error_code 404, as on the real one. That includes GET /associations/...,
which confluent-kafka's default subject name strategy (AssociatedNameStrategy) asks first, from
every serializer and deserializer, per topic: a registry without associations answers 404,
and the client falls back to the topic strategy ({topic}-value).

The `format` query is ignored: a schema is answered as registered. That is what the Python
Protobuf serde needs: its serializer registers, and its deserializer asks for (with
format=serialized), the base64 of a serialized FileDescriptorProto. A schema registered as
.proto text, as a Java producer would, is answered as that text even for format=serialized:
a real registry converts it, this server cannot without protoc.

Started with auth "user:password", it answers 401 40101 to a request without that HTTP Basic
Authorization. Every request is logged (method, path as sent, query) so that a test can count
the writer-schema fetches (`schema_fetches`).

In a test: `with SchemaRegistryServer(tmp_path) as registry:` and `registry.url`. In its own
process, which a test may stop or kill (tests.harness.schema_registry.RegistryProcess):
`python -m tests.harness.schema_registry_server --data DIR --port P [--auth user:pass]`.
"""
from __future__ import annotations

import argparse
import base64
import hmac
import json
import socket
import threading
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.harness.schema_registry_store import (SCHEMA_TYPES, RegistryError, RegistryStore, SchemaText,
                                                 schema_not_found)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TEST_REQUESTS = ("_test", "requests")
_MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # as sent: a subject's "/" arrives as %2F
    query: dict


def schema_fetches(requests: list[Request], schema_id: int | None = None) -> int:
    """How many GET /schemas/ids/{id} (of `schema_id`, or of any id) `requests` holds: a
    decoder should fetch each writer schema once per client."""
    pattern = ("schemas", "ids", "*" if schema_id is None else str(schema_id))
    return sum(1 for r in requests if r.method == "GET" and _matches(pattern, _parts(r.path)))


def basic_auth_header(user_password: str) -> str:
    return "Basic " + base64.b64encode(user_password.encode()).decode("ascii")


class SchemaRegistryServer:
    """`with SchemaRegistryServer(data_dir) as registry:`, or start()/stop(); started again,
    it serves on the port it had."""

    def __init__(self, data_dir: Path, port: int = 0, auth: str | None = None, host: str = "127.0.0.1"):
        self.store = RegistryStore(data_dir)
        self.host, self.port = host, port
        self._authorization = basic_auth_header(auth) if auth else None
        self._lock = threading.Lock()  # the request log and the open connections
        self._requests: list[Request] = []
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------
    def bind(self) -> "SchemaRegistryServer":
        """Listen (connections queue from here on) without answering yet."""
        self._httpd = ThreadingHTTPServer((self.host, self.port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.registry = self
        self.port = self._httpd.server_address[1]
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.05)  # stop() waits up to this long

    def start(self) -> "SchemaRegistryServer":
        self.bind()
        self._thread = threading.Thread(target=self.serve_forever, name="schema-registry-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering, as a registry that went down: connections kept alive are cut too, or
        a client's pooled connection would still be answered."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        self._thread.join(10)
        self._httpd = None

    def __enter__(self) -> "SchemaRegistryServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the request log ------------------------------------------------------------------
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def schema_fetches(self, schema_id: int | None = None) -> int:
        return schema_fetches(self.requests(), schema_id)

    # -- what the handler calls -----------------------------------------------------------
    def log(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def authorize(self, authorization: str | None) -> None:
        given = (authorization or "").encode()
        if self._authorization and not hmac.compare_digest(given, self._authorization.encode()):
            raise RegistryError(401, 40101, "Unauthorized")

    def connection_opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def connection_closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)


# -- the API: each handler takes (registry, query, body, *path arguments) -------------------
def _register(registry, query, body, subject):
    version = registry.store.register(subject, SchemaText.from_body(body))
    return {"id": version.id, "version": version.version}


def _lookup(registry, query, body, subject):
    version, schema = registry.store.lookup(subject, SchemaText.from_body(body), _flag(query, "deleted"))
    return {"subject": subject, "id": version.id, "version": version.version, **schema.body()}


def _get_version(registry, query, body, subject, version):
    found, schema = registry.store.version(subject, _version_number(version), _flag(query, "deleted"))
    return {"subject": subject, "id": found.id, "version": found.version, **schema.body()}


def _get_schema(registry, query, body, schema_id):
    if not schema_id.isdigit():
        raise schema_not_found()
    return registry.store.schema(int(schema_id)).body()


def _list_subjects(registry, query, body):
    prefix = query.get("subjectPrefix", "")
    return [s for s in registry.store.subject_names(_flag(query, "deleted")) if s.startswith(prefix)]


def _list_versions(registry, query, body, subject):
    return registry.store.version_numbers(subject, _flag(query, "deleted"))


def _delete_subject(registry, query, body, subject):
    return registry.store.delete_subject(subject, _flag(query, "permanent"))


def _root(registry, query, body):
    return {}


def _schema_types(registry, query, body):
    return list(SCHEMA_TYPES)


def _test_requests(registry, query, body):
    return [asdict(r) for r in registry.requests()]


_ROUTES = (
    ("GET", (), _root),
    ("GET", ("subjects",), _list_subjects),
    ("GET", ("subjects", "*", "versions"), _list_versions),
    ("POST", ("subjects", "*", "versions"), _register),
    ("GET", ("subjects", "*", "versions", "*"), _get_version),
    ("POST", ("subjects", "*"), _lookup),
    ("DELETE", ("subjects", "*"), _delete_subject),
    ("GET", ("schemas", "ids", "*"), _get_schema),
    ("GET", ("schemas", "types"), _schema_types),
    ("GET", TEST_REQUESTS, _test_requests),
)


def _route(method: str, parts: tuple[str, ...]):
    """The handler and its path arguments: 404 for a path no route has, 405 for another method."""
    path_known = False
    for route_method, pattern, handler in _ROUTES:
        if _matches(pattern, parts):
            if route_method == method:
                return handler, [part for p, part in zip(pattern, parts) if p == "*"]
            path_known = True
    if path_known:
        raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")
    raise RegistryError(404, 404, "HTTP 404 Not Found")


def _matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    return len(pattern) == len(parts) and all(p in ("*", part) for p, part in zip(pattern, parts))


def _parts(path: str) -> tuple[str, ...]:
    """The path's segments, each decoded after the split: a subject may hold a "/"."""
    return tuple(unquote(p) for p in path.split("/") if p)


def _flag(query: dict, name: str) -> bool:
    return query.get(name, "false").lower() == "true"  # the client sends both "true" and "True"


def _version_number(text: str) -> int | None:
    """None for the latest ("latest" or -1); 422 42202 for what is not a version."""
    if text in ("latest", "-1"):
        return None
    if text.isdigit() and 1 <= int(text) <= _MAX_VERSION:
        return int(text)
    raise RegistryError(422, 42202, f"The specified version '{text}' is not a valid version id. Allowed values "
                                    f'are between [1, 2^31-1] and the string "latest"')


def _json_body(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except ValueError as exc:
        raise RegistryError(400, 400, f"Unparsable JSON body: {exc}") from None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "schema-registry-test-server"

    def log_message(self, format, *args) -> None:  # noqa: A002 -- quiet: pytest shows failures
        pass

    def setup(self) -> None:
        super().setup()
        self.server.registry.connection_opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.registry.connection_closed(self.connection)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        registry = self.server.registry
        url = urlsplit(self.path)
        parts, query = _parts(url.path), dict(parse_qsl(url.query, keep_blank_values=True))
        raw_body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # read even when refused
        if parts != TEST_REQUESTS:
            registry.log(Request(self.command, url.path, query))
        try:
            registry.authorize(self.headers.get("Authorization"))
            handler, arguments = _route(self.command, parts)
            status, body = 200, handler(registry, query, _json_body(raw_body), *arguments)
        except RegistryError as exc:
            status, body = exc.status, exc.body()
        except OSError as exc:  # the store could not be written
            status, body = 500, {"error_code": 50001, "message": f"Error in the backend data store: {exc}"}
        self._send(status, body)

    def _send(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A Confluent Schema Registry test server (see its docstring).")
    parser.add_argument("--data", type=Path, required=True, help="the folder of its schemas.json")
    parser.add_argument("--port", type=int, default=0, help="0 (the default): any free port")
    parser.add_argument("--auth", help="user:password that every request must give (HTTP Basic)")
    args = parser.parse_args(argv)
    server = SchemaRegistryServer(args.data, args.port, args.auth).bind()
    print(f"listening on {server.url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
