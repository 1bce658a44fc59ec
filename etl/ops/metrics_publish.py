"""Where a run's metrics registry goes: a Prometheus Pushgateway, a textfile for node_exporter, or both.

Both keep what this run did not measure. The Pushgateway is sent a POST (pushadd_to_gateway),
which replaces only the metric names pushed: a failed run leaves the last success's timestamp
in place, and a lock-held run the other run's numbers. The textfile is rewritten the same way:
the families of the previous file that this run did not measure are carried over.

The Pushgateway groups by job=<[job] name> (its URL path /metrics/job/<name>: one group per
ETL job). Every metric names the ETL job in its own label, etl_job=<name>, not in `job`, which
is the target's label in Prometheus: whatever the scrape config, through the gateway or through
node_exporter, a series keeps its ETL job (docs/monitoring.md says why).

Nothing here raises: a gateway that does not answer, or a folder that cannot be written, is
one WARNING line, and the run's exit code stays what the run made it.
"""
from __future__ import annotations

import http.client
import logging
import os
import urllib.error
import tempfile
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, pushadd_to_gateway
from prometheus_client.parser import text_string_to_metric_families

from etl.config.metrics import MetricsConfig

log = logging.getLogger(__name__)

JOB_LABEL = "etl_job"  # the label every metric names its ETL job in


def publish(config: MetricsConfig, job: str, registry: CollectorRegistry) -> None:
    if config.pushgateway is not None:
        push(config, job, registry)
    if config.textfile is not None:
        write_textfile(config.textfile, registry)


def push(config: MetricsConfig, job: str, registry: CollectorRegistry) -> bool:
    try:
        pushadd_to_gateway(config.pushgateway, job=job, registry=registry, timeout=config.push_timeout_seconds)
    # refused, timed out, DNS, HTTP errors (urllib's HTTPError is an OSError), a garbled answer
    except (OSError, http.client.HTTPException) as exc:
        log.warning("metrics not pushed to %s: %s", config.pushgateway, _reason(exc))
        return False
    return True


def write_textfile(path: Path, registry: CollectorRegistry) -> bool:
    """Replace the file atomically (node_exporter may read it at any moment): a temporary file in
    the same folder, flushed, then renamed over it."""
    try:
        text = generate_latest(_Merged(registry, _previous(path)))
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, 0o644)  # node_exporter runs as another user
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        log.warning("metrics not written to %s: %s", path, _reason(exc))
        return False
    return True


def _previous(path: Path) -> list:
    """The metric families of the file as it is, or none if it is missing or unreadable (then
    the new file holds this run's metrics only, and says so)."""
    try:
        return list(text_string_to_metric_families(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("metrics: previous %s not kept (%s); it is replaced by this run's metrics", path, exc)
        return []


class _Merged:
    """This run's families, then the previous file's that this run did not produce. A family
    whose series lack the `etl_job` label was written by a version before the renames of
    docs/monitoring.md: it is not carried over (its old name would stay in the file for ever)."""

    def __init__(self, registry: CollectorRegistry, previous: list):
        self.registry, self.previous = registry, previous

    def collect(self):
        fresh = list(self.registry.collect())
        names = {family.name for family in fresh}
        return fresh + [family for family in self.previous if family.name not in names and _current(family)]


def _current(family) -> bool:
    return bool(family.samples) and all(JOB_LABEL in sample.labels for sample in family.samples)


def _reason(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc) or type(exc).__name__
