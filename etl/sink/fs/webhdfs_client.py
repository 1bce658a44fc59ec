"""Talking to WebHDFS: the HdfsCLI client and its auth, its calls, and the map from a
WebHDFS error to the error it stands for.

HdfsCLI (the `hdfs` package) gives the transport: its InsecureClient (simple auth,
`user.name`) or KerberosClient (SPNEGO), NameNode HA failover, path quoting and timeouts.
The backend uses its public API (status, list, makedirs, delete, rename, read) through
`call`, which turns an HdfsError into the ETL's error. CREATE alone goes below it, through the
two private names in HDFSCLI_PRIVATE_NAMES, because the public `write()` cannot serve an
exactly-once writer: it streams through AsyncWriter, whose queue has no bound (a slow DataNode
lets a whole file pile up in memory), and which, when the writer fails, still finishes the
upload as if the file were whole. tests/unit/test_hdfscli_surface.py pins both names and the
HdfsCLI version range, and fails if the code reaches for any other private name.

Errors come as RemoteException JSON: FileNotFoundException, FileAlreadyExistsException,
AccessControlException, and RetriableException/StandbyException (the NameNode did not run
the call: starting up, or standby during a failover).
"""
from __future__ import annotations

import re
from typing import Callable, TypeVar

import requests
from hdfs import InsecureClient
from hdfs.util import HdfsError

from etl.config import WarehouseAuth, WarehouseConfig
from etl.errors import RETRYABLE_OS_ERRORS, ConfigError, WarehouseError, WarehouseUnavailable
from etl.sink.fs.base import PathExists, PathNotFound

T = TypeVar("T")


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

# HdfsCLI's private names the backend uses, both for CREATE (see the module's docstring).
HDFSCLI_PRIVATE_NAMES = ("_create", "_request")
# HdfsCLI raises HdfsError without a RemoteException name for these answers of its own.
_HDFSCLI_AUTH_FAILURE = "Authentication failure"
_HDFSCLI_RENAME_FALSE = "Unable to rename"


def make_client(warehouse: WarehouseConfig):
    """The HdfsCLI client for the config: KerberosClient when auth = kerberos, else InsecureClient."""
    if warehouse.auth == WarehouseAuth.KERBEROS:
        try:
            from hdfs.ext.kerberos import KerberosClient  # imports requests_kerberos
        except ImportError as exc:
            raise ConfigError(f"[warehouse] auth = kerberos needs the requests-kerberos package, which is not "
                              f"installed here ({exc}); install the ETL with its kerberos extra: "
                              f"pip install 'kafka-hive-etl[kerberos]', on the driver and the executors") from exc
        extra = {"principal": _kerberos_login(warehouse)} if warehouse.kerberos_principal else {}
        return KerberosClient(warehouse.namenode_urls, mutual_auth="OPTIONAL", timeout=warehouse.timeout_seconds,
                              session=_session(), **extra)
    try:
        return InsecureClient(warehouse.namenode_urls, user=warehouse.user, timeout=warehouse.timeout_seconds,
                              session=_session())
    except (KeyError, OSError) as exc:  # getpass found no user name for this process
        raise ConfigError(f"[warehouse] user is not set and this process has no user name ({exc}); "
                          f"set [warehouse] user to the HDFS user the ETL writes as") from exc


def _kerberos_login(warehouse: WarehouseConfig):
    """Who SPNEGO logs in as: the principal from the ticket cache, or with kerberos_keytab the
    principal from the keytab. pyspnego then gets a fresh ticket from the keytab for every new
    SPNEGO exchange (a MEMORY cache of its own, never the user's), so no ticket expires under a
    long run; the NameNode's auth cookie spares the KDC all the requests in between."""
    if warehouse.kerberos_keytab is None:
        return warehouse.kerberos_principal
    import spnego  # pyspnego, requests-kerberos's own dependency
    keys = _keytab_principals(warehouse.kerberos_keytab)
    name = warehouse.kerberos_principal or ""  # the config requires it with a keytab
    # A name without a realm is the keytab's principal of that name in any realm.
    if name not in keys and not ("@" not in name and any(key.partition("@")[0] == name for key in keys)):
        raise ConfigError(f"[warehouse] kerberos_keytab: {warehouse.kerberos_keytab} holds no key of "
                          f"kerberos_principal {name} (it holds {', '.join(sorted(keys)) or 'none'}); "
                          f"export that principal's key into it (kadmin: ktadd -k FILE PRINCIPAL) or name the "
                          f"principal it holds")
    return spnego.KerberosKeytab(keytab=warehouse.kerberos_keytab, principal=name)


def _keytab_principals(path: str) -> set[str]:
    import krb5  # pykrb5, pyspnego's Kerberos dependency
    context = krb5.init_context()
    try:
        keytab = krb5.kt_resolve(context, f"FILE:{path}".encode())
        return {krb5.unparse_name_flags(context, entry.principal).decode() for entry in keytab}
    except krb5.Krb5Error as exc:
        raise ConfigError(f"[warehouse] kerberos_keytab: {path} is not a keytab that Kerberos can read ({exc}); "
                          f"export one with kadmin (ktadd -k FILE PRINCIPAL) or ktutil") from exc


def _session() -> requests.Session:
    session = requests.Session()
    # Clusters with dfs.webhdfs.rest-csrf.enabled refuse PUT and DELETE without this header;
    # the others ignore it.
    session.headers["X-XSRF-HEADER"] = "true"
    return session


def auth_hint(warehouse: WarehouseConfig) -> str:
    """What to check when HDFS refuses the ETL, for the auth mode in use."""
    if warehouse.auth == WarehouseAuth.KERBEROS and warehouse.kerberos_keytab:
        return (f"Check [warehouse] kerberos_keytab ({warehouse.kerberos_keytab}): its key of "
                f"{warehouse.kerberos_principal} may be stale (export it anew: kadmin ktadd), and that this "
                f"principal may write the warehouse folder")
    if warehouse.auth == WarehouseAuth.KERBEROS:
        return ("Check the Kerberos ticket of this process (kinit; or set [warehouse] kerberos_keytab to log in "
                "from a keytab) and that its principal may write the warehouse folder")
    return f"Check [warehouse] user ({warehouse.user!r}) and the HDFS permissions of the warehouse folder"


def start_create(client, warehouse: WarehouseConfig, path: str) -> requests.Response:
    """CREATE's first step (overwrite=false), its answer unread: the NameNode's 307 to a DataNode."""
    try:
        return client._create(path, strict=False, overwrite="false")
    except HdfsError as exc:  # HdfsCLI raises Retriable/Standby itself, even with strict=False
        raise hdfs_error(exc, f"CREATE {path}", path, auth_hint(warehouse)) from exc


def call(warehouse: WarehouseConfig, what: str, path: str, method: Callable[..., T], *args, **kwargs) -> T:
    """One call of HdfsCLI's public API, an HdfsError turned into the ETL's error for it."""
    try:
        return method(*args, **kwargs)
    except HdfsError as exc:
        raise hdfs_error(exc, what, path, auth_hint(warehouse)) from exc
    except (ValueError, KeyError) as exc:  # the answer was not WebHDFS JSON
        raise WarehouseError(f"{what}: the answer is not WebHDFS JSON ({type(exc).__name__}: {exc}); is the url's "
                             f"host:port the NameNode's HTTP address?") from exc


def is_rename_refused(exc: HdfsError) -> bool:
    """HdfsCLI's rename() raised for WebHDFS's {"boolean": false}: the destination exists, or
    the source or the destination's folder is missing."""
    return not exc.exception and str(exc.message).startswith(_HDFSCLI_RENAME_FALSE)


def hdfs_error(exc: HdfsError, what: str, path: str, hint: str) -> WarehouseError:
    """The WarehouseError for an HdfsError raised by HdfsCLI."""
    name, message = str(exc.exception or ""), str(exc.message)
    denied = not name and message.startswith(_HDFSCLI_AUTH_FAILURE)  # HdfsCLI's word for HTTP 401
    return _error_for(name, message, what, path, hint, missing=False, denied=denied, status="")


def remote_error(response: requests.Response, what: str, path: str, hint: str) -> WarehouseError:
    """The WarehouseError for a non-2xx answer, from its RemoteException JSON."""
    name, message = _remote_exception(response)
    return _error_for(name, message, what, path, hint, missing=not name and response.status_code == 404,
                      denied=response.status_code == 401, status=f"HTTP {response.status_code} ")


def _error_for(name: str, message: str, what: str, path: str, hint: str, *, missing: bool, denied: bool,
               status: str) -> WarehouseError:
    message = _one_line(message)
    if name in RETRYABLE_REMOTE_EXCEPTIONS:
        return NameNodeBusy(f"{what}: the NameNode answered {name} ({message}); it did not run the call")
    if name == "FileNotFoundException" or missing:
        return PathNotFound(f"{what}: {path} does not exist ({message})")
    if name == "FileAlreadyExistsException":
        return PathExists(f"{what}: {path} already exists ({message}); it was left as it is")
    if name in _DENIED_EXCEPTIONS or denied:
        return WarehouseError(_denied(name, message, what, hint))
    if "Quota" in name and "Exceeded" in name:  # DSQuota, NSQuota, QuotaByStorageType: a folder is full
        return WarehouseError(f"{what}: a folder's HDFS quota is exceeded ({name}: {message}). Nothing was "
                              f"published; free space there, or raise its quota (hdfs dfsadmin -setSpaceQuota "
                              f"or -setQuota, -clrSpaceQuota to remove it), then run again")
    if name == "SafeModeException":
        return WarehouseUnavailable(f"{what}: the NameNode is in safe mode ({message}); run again once it has "
                                    f"left safe mode (hdfs dfsadmin -safemode get)")
    return WarehouseError(f"{what}: WebHDFS answered {status}{name + ': ' if name else ''}{message}")


# How a NameNode with dfs.permissions.enabled words a refusal (FSPermissionChecker): the user,
# the access it lacks, and the inode that refused it, with its owner, group and mode.
_PERMISSION_DENIED = re.compile(r'user=(?P<user>[^,]+), access=(?P<access>\w+), inode="(?P<inode>[^"]+)"'
                                r'(?::(?P<owner>[^:\s]*):(?P<group>[^:\s]*):(?P<mode>[-dlrwxstST+]+))?')


def _denied(name: str, message: str, what: str, hint: str) -> str:
    """A refusal, worded for the operator: who lacks which permission on which path, and how to
    give it, when the NameNode's message says so (permissions on); else its message and the hint."""
    found = _PERMISSION_DENIED.search(message)
    if found is None:
        return f"{what}: permission denied ({name or 'HTTP 401'}: {message}). {hint}"
    user, access, inode = found["user"], found["access"], found["inode"]
    held = f" (owner {found['owner']}, group {found['group']}, {found['mode']})" if found["mode"] else ""
    return (f"{what}: permission denied: HDFS user {user} lacks {access} permission on {inode}{held}. Give "
            f"the folder to the job's user (hdfs dfs -chown -R {user} {inode}) or grant "
            f"{user} {access} on it (hdfs dfs -chmod, hdfs dfs -setfacl), or set [warehouse] user to the folder's "
            f"owner, then run again")


def _one_line(message: str) -> str:
    """A NameNode's message on one line, without the Java stack trace a DataNode appends to it,
    so that the error's remedy, after it, is on the line the operator reads."""
    lines = (line.strip() for line in message.splitlines())
    return " ".join(line for line in lines if line and not line.startswith(("at ", "...")))


def _remote_exception(response: requests.Response) -> tuple[str, str]:
    try:
        remote = response.json()["RemoteException"]
        return str(remote.get("exception") or ""), str(remote.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", f"HTTP {response.status_code} {response.reason}: {response.text[:200]!r}"
