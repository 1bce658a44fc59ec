"""[zookeeper] auth = digest against the real ZooKeeper: every znode the job creates carries
the job's ACL, a client without the password can neither read nor change the job's state,
wrong or missing credentials stop the job and its tools with exit 2 and a message that says
what to do, and a job made before auth was set is refused until protected as the message says."""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError, NotEmptyError
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from etl.config import RetryConfig, ZooKeeperConfig
from etl.errors import EXIT_USAGE, ZooKeeperAccessDenied
from etl.model.batch import Batch, BatchState, OffsetRange, SkippedRange
from etl.model.binding import Target
from etl.model.events import OffsetChange, PendingReset, Reset
from etl.state.store import ZkPaths, ZkStateStore
from tests.harness.data import events_by_partition
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import expected_offsets, table_offsets

pytestmark = pytest.mark.cell("zookeeper-digest")

RETRY = RetryConfig(attempts=2, initial_wait_seconds=0.1, max_wait_seconds=0.2)
USER = "etl"
ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")  # Debian's zookeeper package (scripts/setup installs it)


@pytest.fixture
def password(tmp_path) -> tuple[str, Path]:
    secret = f"pw-{uuid.uuid4().hex}"
    path = tmp_path / "zk-password"
    path.write_text(secret + "\n")  # a trailing line break, as editors and `echo` leave it
    return secret, path


@pytest.fixture
def job_root(stack, zk, zk_root, password):
    """zk_root, whose parent exists with ZooKeeper's open ACL (so that the job never creates a
    parent shared with other tests under its own ACL), removed after the test as the job's user."""
    zk.ensure_path(zk_root.rsplit("/", 1)[0])
    yield zk_root
    owner = _client(stack, f"{USER}:{password[0]}")
    try:
        owner.delete(zk_root, recursive=True)
    except NoNodeError:
        pass
    finally:
        _stop(owner)


def _client(stack, credentials: str | None = None) -> KazooClient:
    client = KazooClient(hosts=stack.zk_hosts, timeout=10,
                         auth_data=[("digest", credentials)] if credentials else None)
    client.start(timeout=15)
    return client


def _stop(client: KazooClient) -> None:
    client.stop()
    client.close()


def _config(stack, root, password, auth="digest", secret=None) -> ZooKeeperConfig:
    if auth == "none":
        return ZooKeeperConfig(hosts=stack.zk_hosts, root=root, session_timeout_seconds=4)
    return ZooKeeperConfig(hosts=stack.zk_hosts, root=root, session_timeout_seconds=4, auth="digest",
                           digest_user=USER, digest_password=secret or password[0], digest_password_file=password[1])


def _make_state(config: ZooKeeperConfig) -> ZkPaths:
    """Every kind of znode the store creates: lock, owner, the committed pointer, snapshots
    with their chunks, a plan with its range chunk, a batch, a skip event and a reset event.
    The lock stays held."""
    store = ZkStateStore(config, "job", RETRY)
    store.connect()
    assert store.session.acquire_lock() is None
    skipped = SkippedRange("t", 1, 5, 8, 8, 20)
    planned = Batch(1, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"},
                    (OffsetRange("t", 0, 0, 10, None), OffsetRange("t", 1, 8, 20, None)), skipped=(skipped,))
    version = store.batches.write_plan(planned)
    written, version = store.batches.advance(planned, version, BatchState.WRITTEN, rows=22, rejected=0)
    registered, version = store.batches.advance(written, version, BatchState.REGISTERED)
    store.batches.commit(registered, version)
    reset = Reset("2026-01-01T00:00:00+00:00", "test", (OffsetChange("t", 0, 10, 4),))
    store.operator.write_pending_reset(PendingReset(reset, {}))
    store.operator.finish_reset(reset, {"t": "AaIFnTSZfgCuWxfsrPJLjg"})
    store.operator.bind_first(Target("db", "t", "file:///w/db.db/t", "file:///w/db.db/t_rejected"))
    return store


def _tree(client: KazooClient, path: str) -> list[str]:
    nodes = [path]
    for child in client.get_children(path):
        nodes += _tree(client, f"{path}/{child}")
    return nodes


def test_every_znode_the_job_creates_carries_the_digest_acl(stack, job_root, password):
    config = _config(stack, job_root, password)
    store = _make_state(config)
    owner = _client(stack, f"{USER}:{password[0]}")
    try:
        nodes = _tree(owner, job_root)
        relative = {node[len(job_root):] for node in nodes}
        # Each kind of node, created by ensure_path, create or a transaction's create:
        assert {"", "/job", "/job/lock", "/job/owner", "/job/committed", "/job/offsets/~migrated",
                "/job/offsets/~migrated/see-committed", "/job/plans/0000000001",
                "/job/plans/0000000001/ranges-00000", "/job/batches/0000000001"} <= relative, relative
        assert any(n.startswith("/job/snapshots/s-") and "/offsets-" in n for n in relative), relative
        assert len([n for n in relative if n.startswith("/job/events/event-")]) == 2, relative
        expected = [make_digest_acl(USER, password[0], all=True)]
        unprotected = {node: owner.get_acls(node)[0] for node in nodes if owner.get_acls(node)[0] != expected}
        assert unprotected == {}
    finally:
        _stop(owner)
        store.session.release_lock()
        store.close()


@pytest.mark.parametrize("credentials", [None, f"{USER}:wrong-password", "intruder:whatever"])
def test_a_client_without_the_password_can_neither_read_nor_change_the_job_state(
        stack, job_root, password, credentials):
    store = _make_state(_config(stack, job_root, password))
    owner = _client(stack, f"{USER}:{password[0]}")
    outsider = _client(stack, credentials)
    try:
        nodes = _tree(owner, job_root)
        before = {node: owner.get(node)[0] for node in nodes}
        attempts = {
            "get": lambda node: outsider.get(node),
            "get_children": lambda node: outsider.get_children(node),
            "get_acls": lambda node: outsider.get_acls(node),
            "set": lambda node: outsider.set(node, b"0"),
            "create a child": lambda node: outsider.create(f"{node}/planted", b"0"),
            "delete": lambda node: outsider.delete(node),  # the root's parent is open: NotEmpty there
            "set_acls": lambda node: outsider.set_acls(node, OPEN_ACL_UNSAFE),
        }
        allowed = []
        for node in nodes:
            for what, attempt in attempts.items():
                try:
                    attempt(node)
                    allowed.append(f"{what} {node}")
                except (NoAuthError, NotEmptyError):
                    pass
        assert allowed == []
        assert {node: owner.get(node)[0] for node in _tree(owner, job_root)} == before
        assert owner.exists(f"{job_root}/job/lock") is not None  # still this run's
    finally:
        _stop(outsider)
        _stop(owner)
        store.session.release_lock()
        store.close()


def test_a_wrong_password_or_none_stops_the_store_with_a_message_naming_zookeeper(stack, job_root, password):
    store = _make_state(_config(stack, job_root, password))
    store.session.release_lock()
    store.close()
    not_it = f"not-it-{uuid.uuid4().hex}"
    with pytest.raises(ZooKeeperAccessDenied) as wrong:
        ZkStateStore(_config(stack, job_root, password, secret=not_it), "job", RETRY).connect()
    message = str(wrong.value)
    assert wrong.value.exit_code == EXIT_USAGE
    assert f"ZooKeeper refused [zookeeper] digest_user '{USER}' access to {job_root}/job (NoAuth)" in message
    assert f"the password in digest_password_file ({password[1]})" in message
    assert not_it not in message and password[0] not in message  # never a password
    with pytest.raises(ZooKeeperAccessDenied, match=r"Set \[zookeeper\] auth = digest, digest_user and "
                                                    r"digest_password_file"):
        ZkStateStore(_config(stack, job_root, password, auth="none"), "job", RETRY).connect()


def test_a_job_made_without_auth_is_refused_until_protected_with_the_command_the_message_gives(
        stack, zk, job_root, password):
    open_store = _make_state(_config(stack, job_root, password, auth="none"))
    open_store.session.release_lock()
    open_store.close()
    job = f"{job_root}/job"
    with pytest.raises(ZooKeeperAccessDenied) as refused:
        ZkStateStore(_config(stack, job_root, password), "job", RETRY).connect()
    message = str(refused.value)
    assert f"[zookeeper] auth = digest, but anyone may read and change {job}" in message
    assert password[0] not in message
    commands = [line.strip() for line in message.splitlines()[1:]]
    assert commands == [f"zkCli.sh -server {stack.zk_hosts}",
                        f"addauth digest {USER}:<the password in {password[1]}>",
                        f"setAcl -R {job} auth::cdrwa"]
    script = "\n".join([commands[1].replace(f"<the password in {password[1]}>", password[0]), commands[2], "quit", ""])
    result = subprocess.run([str(ZKCLI), "-server", stack.zk_hosts], input=script, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    with pytest.raises(NoAuthError):
        zk.get(f"{job}/committed")  # the shared open client is locked out now
    store = ZkStateStore(_config(stack, job_root, password), "job", RETRY)
    store.connect()
    try:
        assert store.offsets.committed_offsets()[("t", 0)].value == 4
        assert store.session.acquire_lock() is None
    finally:
        store.session.release_lock()
        store.close()


def test_the_acl_check_wants_all_permissions_for_the_user(stack, job_root, password):
    store = _make_state(_config(stack, job_root, password))
    store.session.release_lock()
    job = f"{job_root}/job"
    store.session.client.set_acls(job, [make_digest_acl(USER, password[0], read=True, create=True, admin=True)])
    try:
        with pytest.raises(ZooKeeperAccessDenied, match=rf"{job} does not give \[zookeeper\] digest_user 'etl' all "
                                                        rf"permissions \(its ACL is digest:etl:cra\)"):
            ZkStateStore(_config(stack, job_root, password), "job", RETRY).connect()
    finally:
        store.session.client.set_acls(job, [make_digest_acl(USER, password[0], all=True)])  # so that cleanup may delete
        store.close()


@pytest.mark.slow
def test_etl_run_and_its_tools_authenticate_and_wrong_credentials_exit_2(
        stack, spark, job_root, password, new_topic, produce, write_config, hive_table_name, tmp_path):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 50))
    digest = {"auth": "digest", "digest_user": USER, "digest_password_file": str(password[1])}
    config = write_config(kafka={"topics": topic}, zookeeper=digest)
    result = run_etl(config)
    assert result.returncode == 0, result.stderr[-3000:]
    assert table_offsets(spark, "etl_test", hive_table_name) == expected_offsets(topic, {0: 50, 1: 50})

    # reset-offsets to where the job is records an event (one more znode) and changes nothing else.
    for command, args in [("status", ()), ("recover", ()), ("verify", ()),
                          ("reset-offsets", ("--to", "latest", "--execute"))]:
        ran = etl_command(config, command, *args, timeout=300)
        assert ran.returncode == 0, f"etl {command}: {ran.stdout}\n{ran.stderr[-3000:]}"

    owner = _client(stack, f"{USER}:{password[0]}")
    try:
        nodes = _tree(owner, job_root)
        assert any("/events/event-" in node for node in nodes) and any("/ranges-" in node for node in nodes)
        assert {node: owner.get_acls(node)[0] for node in nodes} == {
            node: [make_digest_acl(USER, password[0], all=True)] for node in nodes}
    finally:
        _stop(owner)

    wrong_file = tmp_path / "wrong-password"
    wrong_file.write_text("not-it\n")
    wrong = write_config(kafka={"topics": topic}, zookeeper={**digest, "digest_password_file": str(wrong_file)})
    unauthenticated = write_config(kafka={"topics": topic})
    for bad, says in [(wrong, f"ZooKeeper refused [zookeeper] digest_user '{USER}' access to {job_root}/"),
                      (unauthenticated, "Set [zookeeper] auth = digest")]:
        for command in ("run", "status", "recover", "reset-offsets"):
            args = ("--to", "earliest", "--execute") if command == "reset-offsets" else ()
            ran = etl_command(bad, command, *args, timeout=300)
            assert ran.returncode == EXIT_USAGE and says in ran.stderr, f"etl {command}: {ran.stderr[-3000:]}"
            assert "Traceback" not in ran.stderr
