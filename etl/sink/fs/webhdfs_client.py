"""Talking to WebHDFS: the HdfsCLI client and its auth, one raw call, and the map from a
WebHDFS answer to the error it stands for.

HdfsCLI (the `hdfs` package) gives the transport: its InsecureClient (simple auth,
`user.name`) or KerberosClient (SPNEGO), NameNode HA failover, path quoting and timeouts.
Each operation is sent raw (strict=False) so that WebHdfsFileSystem reads its outcome itself.
Errors come as RemoteException JSON: FileNotFoundException, FileAlreadyExistsException,
AccessControlException, and RetriableException/StandbyException (the NameNode did not run
the call: starting up, or standby during a failover).
"""
from __future__ import annotations

import requests
from hdfs import InsecureClient
from hdfs.util import HdfsError

from etl.config import WarehouseAuth, WarehouseConfig
from etl.errors import RETRYABLE_OS_ERRORS, ConfigError, WarehouseError, WarehouseUnavailable
from etl.sink.fs.base import PathExists, PathNotFound


class NameNodeBusy(WarehouseUnavailable):
    """The NameNode answered RetriableException or StandbyException: it did not run the call."""


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


def make_client(warehouse: WarehouseConfig):
    """The HdfsCLI client for the config: KerberosClient when auth = kerberos, else InsecureClient."""
    if warehouse.auth == WarehouseAuth.KERBEROS:
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


def auth_hint(warehouse: WarehouseConfig) -> str:
    """What to check when HDFS refuses the ETL, for the auth mode in use."""
    if warehouse.auth == WarehouseAuth.KERBEROS:
        return ("Check the Kerberos ticket (kinit, or the keytab of the Spark job) and that its principal may "
                "write the warehouse folder")
    return f"Check [warehouse] user ({warehouse.user!r}) and the HDFS permissions of the warehouse folder"


def send(client, warehouse: WarehouseConfig, op: str, path: str, **params) -> requests.Response:
    """One WebHDFS call through HdfsCLI (auth, HA failover, quoting), its answer unread."""
    endpoint = getattr(client, _ENDPOINTS[op])
    try:
        return endpoint(path, strict=False, **params)
    except HdfsError as exc:  # HdfsCLI raises these two kinds itself, even with strict=False
        if exc.exception in RETRYABLE_REMOTE_EXCEPTIONS:
            raise NameNodeBusy(f"{op} {path}: the NameNode answered {exc.exception} ({exc.message}); "
                               f"it did not run the call") from exc
        raise WarehouseError(f"{op} {path}: {exc.message} {auth_hint(warehouse)}") from exc


def remote_error(response: requests.Response, what: str, path: str, hint: str) -> WarehouseError:
    """The WarehouseError for a non-2xx answer, from its RemoteException JSON."""
    name, message = _remote_exception(response)
    if name in RETRYABLE_REMOTE_EXCEPTIONS:
        return NameNodeBusy(f"{what}: the NameNode answered {name} ({message}); it did not run the call")
    if name == "FileNotFoundException" or (not name and response.status_code == 404):
        return PathNotFound(f"{what}: {path} does not exist ({message})")
    if name == "FileAlreadyExistsException":
        return PathExists(f"{what}: {path} already exists ({message}); it was left as it is")
    if name in _DENIED_EXCEPTIONS or response.status_code == 401:
        return WarehouseError(f"{what}: permission denied ({name or 'HTTP 401'}: {message}). {hint}")
    if name == "SafeModeException":
        return WarehouseUnavailable(f"{what}: the NameNode is in safe mode ({message}); run again once it has "
                                    f"left safe mode (hdfs dfsadmin -safemode get)")
    return WarehouseError(f"{what}: WebHDFS answered HTTP {response.status_code} {name}: {message}")


def _remote_exception(response: requests.Response) -> tuple[str, str]:
    try:
        remote = response.json()["RemoteException"]
        return str(remote.get("exception") or ""), str(remote.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", f"HTTP {response.status_code} {response.reason}: {response.text[:200]!r}"
