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

from etl.config.model import SchemaRegistryConfig
from etl.config.section import Section, read_secret_files

REGISTRY_SECRET_KEYS = ("basic.auth.user.info", "ssl.key.password")
REGISTRY_FILE_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
REGISTRY_CLIENT_KEYS = ("url", "basic.auth.credentials.source", "proxy", *REGISTRY_SECRET_KEYS, *REGISTRY_FILE_KEYS)
REGISTRY_OWN_KEYS = ("timeout_seconds", *(f"{key}_file" for key in REGISTRY_SECRET_KEYS))
# The client retries 5xx answers up to 3 times by default, sleeping up to 20 s between tries.
NO_CLIENT_RETRIES = {"max.retries": 0}


class RegistrySettings(dict):
    """SchemaRegistryClient settings, as it takes them. The repr masks the secrets: the config
    travels inside every Spark task and may end up in a log line or a traceback."""

    def __repr__(self) -> str:
        return repr({key: "***" if key in REGISTRY_SECRET_KEYS else value for key, value in self.items()})


def schema_registry_section(s: Section) -> SchemaRegistryConfig:
    timeout = s.positive("timeout_seconds", 10.0, float)
    client = RegistrySettings({"url": s.get("url", convert=_urls, required=True)})
    for key in REGISTRY_CLIENT_KEYS[1:]:
        value = s.get(key)
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
