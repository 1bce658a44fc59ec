"""Writer schemas: the schema each Avro or Protobuf message was written with, by the id its
Confluent framing carries, fetched from the Schema Registry with confluent-kafka's client.

What a failure means is decided here, once:
- an id or subject the registry does not know is data: the caller rejects the records
  that name it (None is returned);
- a registry that does not answer, or answers 408/429/5xx, is retried within [retry] and
  then fails the task (SchemaRegistryUnavailable): the batch stays open and resumes;
- anything else (401, 403, a bad request) fails the task too (SchemaRegistryRefused): no
  record is ever rejected because the registry could not be asked.

A decoder is pickled into every Spark task, so WriterSchemas holds only settings. The client
and the schemas it fetched live in the Python worker process (`_PROCESS_CACHE`), which
Spark reuses from task to task: each id is fetched once per worker, not once per task.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from etl.config import RetryConfig, SchemaRegistryConfig
from etl.errors import SchemaRegistryRefused, SchemaRegistryUnavailable
from etl.retry import retry_idempotent

RETRYABLE_HTTP_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
NOT_FOUND_CODES = frozenset({40401, 40402, 40403})  # subject, version, schema not found
AVRO = "AVRO"  # the registry's schemaType; it omits the field for Avro
PROTOBUF = "PROTOBUF"


@dataclass(frozen=True)
class Reference:
    """A schema another one imports (Protobuf imports, Avro named types), by subject and version."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class WriterSchema:
    schema_id: int | None  # None for a version fetched by subject, or the fixed [job] avro_schema
    schema_type: str  # AVRO or PROTOBUF
    text: str  # Avro: the JSON; Protobuf (format=serialized): base64 of a FileDescriptorProto
    references: tuple[Reference, ...] = ()


class _ProcessCache:
    """Per worker process: one client per registry, and every schema fetched through it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._clients: dict[str, object] = {}
        self.schemas: dict[tuple, WriterSchema] = {}

    def client(self, config: SchemaRegistryConfig):
        from confluent_kafka.schema_registry import SchemaRegistryClient
        key = repr(sorted((k, str(v)) for k, v in config.client.items()))
        with self._lock:
            if key not in self._clients:
                self._clients[key] = SchemaRegistryClient(dict(config.client))
            return self._clients[key]


_PROCESS_CACHE = _ProcessCache()


class WriterSchemas:
    """Fetches writer schemas from one registry, each once per process."""

    def __init__(self, registry: SchemaRegistryConfig, retry: RetryConfig):
        self.registry, self.retry = registry, retry

    def by_id(self, schema_id: int, fmt: str | None = None) -> WriterSchema | None:
        """The schema with this id, or None when the registry has none."""
        return self._cached(("id", self.registry.url, schema_id, fmt), f"schema id {schema_id}",
                            lambda client: _from_schema(schema_id, client.get_schema(schema_id, fmt=fmt)))

    def version(self, subject: str, version: int | str, fmt: str | None = None) -> WriterSchema | None:
        """A subject's version (a number, or "latest"), or None when there is none. "latest" is
        never cached: `etl schema suggest`, the start-up check and a registry route's table want
        today's (get_version asks each time; the client's get_latest_version keeps its first answer
        for the life of the process)."""
        def fetch(client):
            registered = client.get_version(subject, version, fmt=fmt)
            return _from_schema(registered.schema_id, registered.schema)
        what = f"subject {subject!r} version {version}"
        if version == "latest":
            return self._ask(what, fetch)
        return self._cached(("version", self.registry.url, subject, version, fmt), what, fetch)

    def _cached(self, key: tuple, what: str, fetch) -> WriterSchema | None:
        """An unknown id is asked again next time: a registry restored from backup may know it."""
        schemas = _PROCESS_CACHE.schemas
        if key not in schemas:
            found = self._ask(what, fetch)
            if found is None:
                return None
            schemas[key] = found
        return schemas[key]

    def _ask(self, what: str, fetch) -> WriterSchema | None:
        client = _PROCESS_CACHE.client(self.registry)
        return retry_idempotent(self.retry, (SchemaRegistryUnavailable,), f"Schema Registry {what}",
                                lambda: _classified(self.registry.url, what, lambda: fetch(client)))


def unknown_schema_id(schema_id: int, schemas: WriterSchemas) -> str:
    """Why the records naming an id the registry does not know are rejected."""
    return f"unknown schema id {schema_id}: the Schema Registry at {schemas.registry.url} has no such schema"


def _classified(url: str, what: str, call):
    """call(), with the client's failures turned into None (not found) or the ETL's errors."""
    import httpx2
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    try:
        return call()
    except SchemaRegistryError as exc:
        if exc.error_code in NOT_FOUND_CODES:
            return None
        if exc.http_status_code in RETRYABLE_HTTP_STATUSES:
            raise SchemaRegistryUnavailable(f"the Schema Registry at {url} answered {what} with "
                                            f"{exc.http_status_code}: {exc.error_message}") from exc
        raise SchemaRegistryRefused(f"the Schema Registry at {url} refused {what}: {exc}; check "
                                    f"[schema_registry] (url, credentials)") from exc
    except httpx2.TransportError as exc:
        raise SchemaRegistryUnavailable(f"the Schema Registry at {url} did not answer {what}: {exc}; is it up? "
                                        f"The batch stays open and the next run resumes it") from exc


def _from_schema(schema_id: int | None, schema) -> WriterSchema:
    references = tuple(Reference(r.name, r.subject, int(r.version)) for r in (schema.references or ()))
    return WriterSchema(schema_id, schema.schema_type or AVRO, schema.schema_str, references)
