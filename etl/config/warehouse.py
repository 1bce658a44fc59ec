"""The [warehouse] section: where the warehouse is (a local folder or WebHDFS), how Hive
names the same folder, and how the ETL authenticates to WebHDFS."""
from __future__ import annotations

import getpass
import posixpath
import re
from urllib.parse import urlsplit

from etl.config.model import WEBHDFS_SCHEMES, WarehouseAuth, WarehouseConfig
from etl.config.section import Section, plain_location, resolve

WEBHDFS_ONLY_KEYS = ("user", "auth", "kerberos_principal", "kerberos_keytab", "timeout_seconds")


def warehouse_section(s: Section) -> WarehouseConfig:
    url = s.get("url", convert=_warehouse_url)
    hive_location = s.get("hive_location", convert=_hive_location)
    if urlsplit(url).scheme not in WEBHDFS_SCHEMES:
        for key in WEBHDFS_ONLY_KEYS:
            if s.is_set(key):
                raise s.fail(key, "applies only to a webhdfs:// or swebhdfs:// url; remove it")
        warehouse = WarehouseConfig(url=url, hive_location=hive_location)
    else:
        warehouse = _webhdfs_warehouse(s, url, hive_location)
    s.reject_unknown()
    return warehouse


def _warehouse_url(raw: str) -> str:
    plain_location(raw)
    url = raw.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme == "file":
        if not raw.startswith("file:///"):
            raise ValueError("write a local warehouse as file:///absolute/path")
    elif parts.scheme in WEBHDFS_SCHEMES:
        _webhdfs_address(parts)
    else:
        raise ValueError("use file:///absolute/path, webhdfs://namenode:port/absolute/path, "
                         "or swebhdfs://namenode:port/absolute/path for WebHDFS over TLS")
    if parts.query or parts.fragment:
        raise ValueError("must not have a query (?...) or fragment (#...)")
    return url


def _webhdfs_address(parts) -> None:
    example = f"{parts.scheme}://namenode:port/absolute/path"
    for address in parts.netloc.split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or "@" in address:
            raise ValueError(f"{address or 'the address'!r} is not host:port; write {example} (two NameNodes "
                             f"of an HA pair as {parts.scheme}://nn1:port,nn2:port/absolute/path)")
    path = parts.path or "/"
    if posixpath.normpath(path) != path:
        raise ValueError(f"the path {path!r} is not a normalized absolute path; write {example}")


def _hive_location(raw: str) -> str:
    plain_location(raw)
    parts = urlsplit(raw)
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*$", parts.scheme) or not raw.startswith(f"{parts.scheme}://"):
        raise ValueError("must be a URI such as hdfs://nameservice1/warehouse or file:///absolute/path")
    if not parts.path.startswith("/") or (parts.scheme == "file" and not raw.startswith("file:///")):
        raise ValueError("must name an absolute folder, e.g. hdfs://nameservice1/warehouse or file:///absolute/path")
    if parts.query or parts.fragment:
        raise ValueError("must not have a query (?...) or fragment (#...)")
    return raw.rstrip("/")


def _webhdfs_warehouse(s: Section, url: str, hive_location: str | None) -> WarehouseConfig:
    if hive_location is None:
        raise s.fail("hive_location", f"is required when url is {urlsplit(url).scheme}://: set it to the URI "
                                      "Hive uses for the same folder, e.g. hdfs://nameservice1/warehouse")
    auth = s.choice("auth")
    user, principal = s.get("user"), s.get("kerberos_principal")
    if auth == WarehouseAuth.KERBEROS and user is not None:
        raise s.fail("user", "is for auth = simple; with auth = kerberos the Kerberos principal is the HDFS "
                             "user (set kerberos_principal to choose one)")
    if auth == WarehouseAuth.SIMPLE and principal is not None:
        raise s.fail("kerberos_principal", "needs auth = kerberos")
    if auth == WarehouseAuth.SIMPLE and user is None:
        user = _current_user()  # decided once, here: the executors then act as the same HDFS user
    return WarehouseConfig(url=url, hive_location=hive_location, user=user, auth=auth,
                           kerberos_principal=principal, kerberos_keytab=_keytab(s, auth, principal),
                           timeout_seconds=s.positive("timeout_seconds"))


def _keytab(s: Section, auth: WarehouseAuth, principal: str | None) -> str | None:
    """kerberos_keytab as an absolute path (relative to the config's folder), read once here so
    that a missing or unreadable keytab exits 2 before anything starts. Whether it holds the
    principal's key is checked where the Kerberos packages are, on the driver
    (etl.sink.fs.webhdfs_client)."""
    path = s.get("kerberos_keytab", convert=lambda raw: resolve(s.path.parent, raw))
    if path is None:
        return None
    if auth != WarehouseAuth.KERBEROS:
        raise s.fail("kerberos_keytab", "needs auth = kerberos")
    if principal is None:
        raise s.fail("kerberos_principal", "is required with kerberos_keytab: the principal whose key the keytab "
                                           "holds, e.g. etl@EXAMPLE.COM")
    try:
        with open(path, "rb") as keytab:
            keytab.read(1)
    except OSError as exc:
        raise s.fail("kerberos_keytab", f"cannot read {path}: {exc.strerror or exc}") from exc
    return str(path)


def _current_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): HdfsCLI asks again, per process
        return None
