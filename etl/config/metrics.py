"""[metrics]: where `etl run` publishes its Prometheus metrics (etl.ops.metrics).

Every key is optional, and so is the section: without `pushgateway` and `textfile` nothing is
collected. A batch job lives too briefly to be scraped, so its metrics go either to a
Prometheus Pushgateway or to a file that node_exporter's textfile collector reads.
Parsed in etl.config.parse (the Section type lives above this module's floor in the package).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True)
class MetricsConfig:
    pushgateway: str | None = None  # http(s)://host:port of a Prometheus Pushgateway
    textfile: Path | None = None  # a .prom file, replaced atomically at the end of every run
    push_timeout_seconds: float = 5.0  # one push; a gateway that does not answer in time is logged

    @property
    def enabled(self) -> bool:
        return self.pushgateway is not None or self.textfile is not None


def metrics_section(s) -> MetricsConfig:
    """`s`: the [metrics] etl.config.section.Section."""
    config = MetricsConfig(
        pushgateway=s.get("pushgateway", convert=gateway_url),
        textfile=s.get("textfile", convert=textfile_path),
        push_timeout_seconds=s.get("push_timeout_seconds", convert=_timeout),
    )
    s.reject_unknown()
    return config


def gateway_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL such as http://pushgateway:9091")
    if parts.query or parts.fragment:
        raise ValueError("must be the gateway's base URL, without ?query or #fragment")
    return raw.rstrip("/")


def textfile_path(raw: str) -> Path:
    """An absolute path in an existing folder: node_exporter reads one fixed folder, and the
    file is replaced through a temporary file beside it (an atomic rename needs the same folder)."""
    path = Path(raw)
    if not path.is_absolute():
        raise ValueError("must be an absolute path, in the folder node_exporter's "
                         "--collector.textfile.directory names")
    if path.suffix != ".prom":
        raise ValueError("must end in .prom: node_exporter's textfile collector reads only *.prom files")
    if not path.parent.is_dir():
        raise ValueError(f"folder {path.parent} does not exist")
    return path


def _timeout(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a number of seconds greater than 0")
    return value
