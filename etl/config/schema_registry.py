"""The [schema_registry] section: where the avro and protobuf decoders fetch writer schemas.

The keys are confluent-kafka SchemaRegistryClient's own (url, basic.auth.user.info, ssl.*),
so that a setting reads the same here as in a producer's config. Secrets may come from the
file named by `<key>_file`, as in [kafka]. Retries are not the client's: it would wait and
retry inside a Spark task behind the job's back, so its own are off and [retry] bounds them
(etl.rows.decoders.writer_schemas). A client is built once here, connecting nowhere, so that a
bad value exits 2 naming the key.
"""
from __future__ import annotations

import os

from etl.config.keys import SectionKind, secret_keys
from etl.config.model import DecoderKind, JobConfig, SchemaRegistryConfig
from etl.config.routes import Routes
from etl.config.section import Section, read_secret_files
from etl.errors import ConfigError

REGISTRY_SECRET_KEYS = secret_keys(SectionKind.SCHEMA_REGISTRY)
REGISTRY_FILE_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
REGISTRY_CLIENT_KEYS = ("url", "basic.auth.credentials.source", "proxy", *REGISTRY_SECRET_KEYS, *REGISTRY_FILE_KEYS)
# The client retries 5xx answers up to 3 times by default, sleeping up to 20 s between tries.
NO_CLIENT_RETRIES = {"max.retries": 0}


class RegistrySettings(dict):
    """SchemaRegistryClient settings, as it takes them. The repr masks the secrets: the config
    travels inside every Spark task and may end up in a log line or a traceback."""

    def __repr__(self) -> str:
        return repr({key: "***" if key in REGISTRY_SECRET_KEYS else value for key, value in self.items()})


def schema_registry_section(s: Section) -> SchemaRegistryConfig:
    timeout = s.positive("timeout_seconds")
    client = RegistrySettings({"url": s.get("url", convert=_urls)})
    for key in REGISTRY_CLIENT_KEYS[1:]:
        value = s.get(key, convert=str)  # as written: the client judges it
        if value is not None:
            client[key] = value
    read_secret_files(s, client, REGISTRY_SECRET_KEYS)
    for key in REGISTRY_FILE_KEYS:
        if key in client and not os.path.exists(str(client[key])):
            raise s.fail(key, f"{client[key]} does not exist (it must exist on the driver and on every executor)")
    if "basic.auth.user.info" in client and ":" not in str(client["basic.auth.user.info"]):
        raise s.fail("basic.auth.user.info", "must be user:password")
    s.reject_unknown()
    client.update(NO_CLIENT_RETRIES, timeout=timeout)
    _check_with_client(s, client)
    return SchemaRegistryConfig(client=client, timeout_seconds=timeout)


def _urls(raw: str) -> str:
    urls = [url.strip() for url in raw.split(",") if url.strip()]
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
    if not urls:
        raise ValueError("names no URL")
    return ",".join(urls)


def _check_with_client(s: Section, client: RegistrySettings) -> None:
    """Let the client judge its settings (TLS files that do not load, auth it cannot use)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    try:
        SchemaRegistryClient(dict(client))
    except (ValueError, TypeError, OSError) as exc:
        reason = str(exc)
        for key in REGISTRY_SECRET_KEYS:
            if client.get(key):
                reason = reason.replace(str(client[key]), "***")
        named = [key for key in client if key in reason]
        raise (s.fail(named[0], f"the Schema Registry client refuses it: {reason}") if named else
               s.fail("url", f"the Schema Registry client refuses these settings: {reason}")) from exc


def registry_for(s: Section, job: JobConfig, routes: Routes) -> SchemaRegistryConfig | None:
    """[schema_registry], which the avro decoder needs unless avro_schema fixes the schema, the
    protobuf decoder always, and a route whose table follows the registry; any other decoder has
    no use for it. With [route] sections, what one route needs is needed."""
    path = s.path
    if job.avro_schema is not None and job.decoder is not DecoderKind.AVRO:
        raise ConfigError(f"{path}: [job] avro_schema: applies only to decoder = avro")
    needing = [route for route in routes.routes
               if route.decoder.reads_writer_schemas and route.avro_schema is None or route.from_registry]
    if not s.values:
        if needing:
            route = needing[0]
            hint = f" (or, for plain Avro without the registry's framing, set {route.key_where('avro_schema')})" \
                if route.decoder is DecoderKind.AVRO else ""
            raise ConfigError(f"{path}: [schema_registry] url: is required with decoder = {route.decoder}"
                              f"{route.in_messages()}{hint}")
        return None
    if not any(route.decoder.reads_writer_schemas for route in routes.routes):
        raise ConfigError(f"{path}: [schema_registry]: decoder = {job.decoder} reads no registry; remove the "
                          f"section, or set [job] decoder = avro or protobuf")
    if job.avro_schema is not None:  # a config without [route] sections: with them it is refused (etl.config.parse)
        raise ConfigError(f"{path}: [job] avro_schema: set either avro_schema (plain Avro, one fixed schema) or "
                          f"[schema_registry] (the registry's framing, a schema id in each message), not both")
    return schema_registry_section(s)
