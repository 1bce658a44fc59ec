"""Who may touch the job's znodes: [zookeeper] auth = none | digest.

With digest, the client authenticates as digest_user, and every znode it creates carries one
ACL entry: that user, all permissions. kazoo applies a client's default_acl to create(),
ensure_path() (missing parents included) and a transaction's create() (kazoo 2.11,
client.py), and those are the only ways the store creates znodes, so no call needs an acl=
argument of its own; tests/integration/test_zk_acl.py walks the whole tree to prove it. Another client can
still see that a znode exists and its version (exists() needs no permission in ZooKeeper), but
cannot read, list, change, delete or re-ACL it.

On connecting, the store checks the job's node against the configured auth: the job's state
is protected only if that node is, because whoever may create children under it may plant
offsets. A job made before digest was set is refused, with the one-off command that fixes it.
"""
from __future__ import annotations

from kazoo.security import ACL, ANYONE_ID_UNSAFE, Id, Permissions, make_digest_acl, make_digest_acl_credential

from etl.config import ZooKeeperAuth, ZooKeeperConfig
from etl.errors import ZooKeeperAccessDenied


def client_options(config: ZooKeeperConfig) -> dict:
    """KazooClient keyword arguments for the configured auth."""
    if config.auth == ZooKeeperAuth.NONE:
        return {}
    return {"auth_data": [("digest", f"{config.digest_user}:{config.digest_password}")],
            "default_acl": [make_digest_acl(config.digest_user, config.digest_password, all=True)]}


def check_job_node(config: ZooKeeperConfig, path: str, acls: list[ACL]) -> None:
    """Refuse a job node that digest auth would not protect (anyone may use it), or that does
    not give the configured user every permission the job needs."""
    if config.auth == ZooKeeperAuth.NONE:
        return
    me = Id("digest", make_digest_acl_credential(config.digest_user, config.digest_password))
    if any(acl.id == ANYONE_ID_UNSAFE for acl in acls):
        raise ZooKeeperAccessDenied(
            f"[zookeeper] auth = digest, but anyone may read and change {path} (its ACL is {_describe(acls)}): "
            f"the job's znodes were created before auth = digest was set. Protect them once, with ZooKeeper's "
            f"CLI, then run again:\n{_protect_command(config, path)}")
    mine = [acl for acl in acls if acl.id == me]
    if not mine or mine[0].perms != Permissions.ALL:
        raise ZooKeeperAccessDenied(
            f"{path} does not give [zookeeper] digest_user {config.digest_user!r} all permissions (its ACL is "
            f"{_describe(acls)}); the job reads, creates, changes and deletes its znodes. Set its ACL, then run "
            f"again:\n{_protect_command(config, path)}")


def access_denied(config: ZooKeeperConfig, path: str) -> ZooKeeperAccessDenied:
    """What to say when ZooKeeper answered NoAuth on the job's node (or on creating it)."""
    parent = path.rsplit("/", 1)[0] or "/"
    if config.auth == ZooKeeperAuth.NONE:
        return ZooKeeperAccessDenied(
            f"ZooKeeper refused access to {path} (NoAuth): the job's znodes, or {parent}, are protected by an "
            f"ACL. Set [zookeeper] auth = digest, digest_user and digest_password_file to the credentials they "
            f"were created with.")
    return ZooKeeperAccessDenied(
        f"ZooKeeper refused [zookeeper] digest_user {config.digest_user!r} access to {path} (NoAuth). Either "
        f"the password in digest_password_file ({config.digest_password_file}) is not the one the job's znodes "
        f"were created with (ZooKeeper cannot tell a wrong password from a wrong user), or {parent} belongs to "
        f"other credentials and does not let this user create the job's node. Check the password file; "
        f"`getAcl {path}` (and `getAcl {parent}`) in zkCli.sh shows who may use it.")


def _protect_command(config: ZooKeeperConfig, path: str) -> str:
    # `auth::cdrwa` grants the identities this CLI session has added, so no digest hash and no
    # password ever appears in a message or a log.
    return (f"  zkCli.sh -server {config.hosts}\n"
            f"  addauth digest {config.digest_user}:<the password in {config.digest_password_file}>\n"
            f"  setAcl -R {path} auth::cdrwa")


def _describe(acls: list[ACL]) -> str:
    return ", ".join(f"{acl.id.scheme}:{acl.id.id.split(':')[0]}:{_perms(acl.perms)}" for acl in acls) or "empty"


def _perms(perms: int) -> str:
    flags = ((Permissions.CREATE, "c"), (Permissions.DELETE, "d"), (Permissions.READ, "r"),
             (Permissions.WRITE, "w"), (Permissions.ADMIN, "a"))
    return "".join(letter for bit, letter in flags if perms & bit) or "none"
