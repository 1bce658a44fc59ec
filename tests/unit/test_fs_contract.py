"""One contract suite for every warehouse filesystem backend (in the spirit of luigi's
FileSystemTargetTestMixin): the commit protocol relies on exactly these behaviours.

Backends here: the local filesystem, and WebHDFS against tests/harness/webhdfs_server.py (a server
that follows the WebHDFS REST spec over a local folder, in this process). The same suite runs
against a real NameNode and DataNode in tests/integration/test_fs_contract_hdfs.py, which imports
it: a real HDFS is a service, and tests/unit needs none. After the suite, WebHDFS-only cases
the real daemons cannot be made to produce on cue: dropped connections, RENAMEs whose answer
was lost, standby answers, CREATE never sent twice, error mapping.
"""
from __future__ import annotations

import io
import os
import pickle
import posixpath
import subprocess
import sys
import uuid
from pathlib import Path
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config import RetryConfig, WarehouseConfig
from etl.errors import ConfigError, WarehouseError
from etl.model.naming import final_name, temp_name
from etl.sink.commit import publish
from etl.sink.fs import LocalFileSystem, PathExists, PathNotFound, filesystem_for
from etl.sink.fs.webhdfs import WebHdfsFileSystem
from etl.sink.layout import FileLayout
from tests.harness.webhdfs_server import WebHdfsTestServer

FAST_RETRY = RetryConfig(attempts=3, initial_wait_seconds=0.05, max_wait_seconds=0.2)
FINAL = final_name("events", 3, 0, 250)


@dataclass
class Backend:
    name: str
    fs: object
    root: str  # a fresh, existing folder of this test's own
    server: WebHdfsTestServer | None = None

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def put(self, path: str, data: bytes) -> None:
        with self.fs.open_write(path) as f:
            f.write(data)

    def read(self, path: str) -> bytes:
        with self.fs.open_read(path) as f:
            return f.read()


def webhdfs_config(url: str, **overrides) -> WarehouseConfig:
    settings = {"hive_location": "hdfs://nameservice1/unused", "user": "etl", "retry": FAST_RETRY,
                "timeout_seconds": 30.0, **overrides}
    return WarehouseConfig(url=url, **settings)


@pytest.fixture
def server(tmp_path):
    with WebHdfsTestServer(tmp_path / "served") as running:
        yield running


@pytest.fixture(params=["local", "webhdfs"])
def backend(request, tmp_path):
    if request.param == "local":
        root = tmp_path / "local-warehouse"
        root.mkdir()
        yield Backend("local", LocalFileSystem(), str(root))
    else:
        with WebHdfsTestServer(tmp_path / "served") as running:
            fs = WebHdfsFileSystem(webhdfs_config(running.webhdfs_url("/warehouse")))
            fs.makedirs("/warehouse/t")
            yield Backend("webhdfs", fs, "/warehouse/t", running)


def written_temp(backend: Backend, data: bytes, final: str = FINAL) -> str:
    temp = backend.path("dt=2026-11-21", temp_name(final))
    backend.put(temp, data)
    return temp


# -- the contract -----------------------------------------------------------------------------
def test_a_temp_file_renamed_becomes_the_final_file_and_the_temp_is_gone(backend):
    temp = written_temp(backend, b"range 0-250")
    final = backend.path("dt=2026-11-21", FINAL)
    assert backend.fs.rename_no_replace(temp, final) is True
    assert backend.read(final) == b"range 0-250"
    assert not backend.fs.exists(temp)
    assert backend.fs.list_dir(backend.path("dt=2026-11-21")) == [FINAL]


def test_the_final_file_is_absent_until_the_rename(backend):
    folder = backend.path("dt=2026-11-21")
    temp, final = posixpath.join(folder, temp_name(FINAL)), posixpath.join(folder, FINAL)
    f = backend.fs.open_write(temp)
    f.write(b"first half ")
    assert not backend.fs.exists(final)
    f.write(b"second half")
    f.close()
    assert not backend.fs.exists(final)
    assert backend.fs.list_dir(folder) == [posixpath.basename(temp)]
    assert backend.fs.rename_no_replace(temp, final)
    assert backend.read(final) == b"first half second half"


def test_renaming_onto_an_existing_file_returns_false_and_changes_nothing(backend):
    final = backend.path("dt=2026-11-21", FINAL)
    assert backend.fs.rename_no_replace(written_temp(backend, b"the first attempt"), final)
    loser = written_temp(backend, b"a racing attempt")
    assert backend.fs.rename_no_replace(loser, final) is False
    assert backend.read(final) == b"the first attempt"
    assert backend.read(loser) == b"a racing attempt"  # left for the caller to delete


def test_a_replay_is_detected_by_exists(backend):
    final = backend.path("dt=2026-11-21", FINAL)
    assert not backend.fs.exists(final)
    backend.fs.rename_no_replace(written_temp(backend, b"done"), final)
    assert backend.fs.exists(final)
    assert backend.fs.exists(backend.path("dt=2026-11-21"))  # folders exist too


def test_open_write_on_an_existing_path_fails_and_leaves_it_alone(backend):
    path = backend.path("taken.parquet")
    backend.put(path, b"someone else's")
    with pytest.raises(PathExists, match="already exists") as raised:
        backend.fs.open_write(path)
    assert isinstance(raised.value, WarehouseError) and isinstance(raised.value, FileExistsError)
    assert backend.read(path) == b"someone else's"


def test_open_write_creates_missing_folders(backend):
    path = backend.path("a", "b", "c", "file.bin")
    backend.put(path, b"x")
    assert backend.fs.list_dir(backend.path("a", "b")) == ["c"]
    assert backend.read(path) == b"x"


def test_open_read_of_a_missing_file_fails_and_reads_are_seekable(backend):
    with pytest.raises(PathNotFound, match="does not exist"):
        backend.fs.open_read(backend.path("absent"))
    path = backend.path("digits")
    backend.put(path, b"0123456789")
    with backend.fs.open_read(path) as f:
        assert f.seekable()
        f.seek(-3, io.SEEK_END)
        assert f.read() == b"789"
        f.seek(2)
        assert f.read(3) == b"234" and f.tell() == 5


def test_list_dir_gives_sorted_names_and_nothing_for_a_missing_folder(backend):
    for name in ("b.parquet", "_tmp.x.a.parquet", "a.parquet"):
        backend.put(backend.path("p", name), name.encode())
    backend.fs.makedirs(backend.path("p", "hour=10"))
    assert backend.fs.list_dir(backend.path("p")) == ["_tmp.x.a.parquet", "a.parquet", "b.parquet", "hour=10"]
    assert backend.fs.list_dir(backend.path("missing")) == []


def test_list_files_gives_each_files_size_and_skips_folders(backend):
    for name, size in (("b.parquet", 7), ("a.parquet", 1234)):
        backend.put(backend.path("p", name), b"x" * size)
    backend.fs.makedirs(backend.path("p", "hour=10"))
    found = backend.fs.list_files(backend.path("p"))
    assert [(info.path, info.size) for info in found] == [(backend.path("p", "a.parquet"), 1234),
                                                          (backend.path("p", "b.parquet"), 7)]
    assert all(info.modified > 0 for info in found)
    assert backend.fs.list_files(backend.path("missing")) == []


def test_walk_files_finds_files_at_any_depth(backend):
    paths = [backend.path("dt=1", "hour=0", "a"), backend.path("dt=1", "hour=1", "b"), backend.path("dt=2", "c"),
             backend.path("top")]
    for path in paths:
        backend.put(path, b"x")
    backend.fs.makedirs(backend.path("dt=3", "hour=9"))  # empty folders yield nothing
    assert sorted(backend.fs.walk_files(backend.root)) == sorted(paths)
    assert list(backend.fs.walk_files(backend.path("missing"))) == []


def test_info_gives_size_and_modification_time(backend):
    path = backend.path("sized")
    backend.put(path, b"x" * 1234)
    info = backend.fs.info(path)
    assert info.path == path and info.size == 1234 and info.modified > 0
    assert backend.fs.info(backend.path("absent")) is None


def test_delete_removes_a_file_once_and_refuses_folders(backend):
    path = backend.path("f", "doomed")
    backend.put(path, b"x")
    assert backend.fs.delete(path) is True
    assert backend.fs.delete(path) is False
    assert not backend.fs.exists(path)
    with pytest.raises(WarehouseError, match="refusing to delete directory"):
        backend.fs.delete(backend.path("f"))
    assert backend.fs.exists(backend.path("f"))


def test_makedirs_creates_parents_is_idempotent_and_fails_on_a_file_in_the_way(backend):
    folder = backend.path("x", "y", "z")
    backend.fs.makedirs(folder)
    backend.fs.makedirs(folder)
    assert backend.fs.list_dir(backend.path("x", "y")) == ["z"]
    backend.put(backend.path("plain"), b"x")
    with pytest.raises(WarehouseError):
        backend.fs.makedirs(backend.path("plain", "sub"))


def test_renaming_a_missing_source_raises_naming_both_paths(backend):
    src, dst = backend.path("_tmp.gone.f"), backend.path("f")
    with pytest.raises(WarehouseError) as raised:
        backend.fs.rename_no_replace(src, dst)
    assert src in str(raised.value) and dst in str(raised.value)
    assert not backend.fs.exists(dst)


def test_a_parquet_file_streamed_through_open_write_is_readable_with_all_row_groups(backend):
    rows = 300_000  # several MiB of poorly compressible data: the upload goes out in many chunks
    table = pa.table({"offset": pa.array(range(rows), pa.int64()),
                      "value": pa.array([uuid.UUID(int=i * 7919).hex for i in range(rows)])})
    folder = backend.path("dt=2026-11-21")
    temp, final = posixpath.join(folder, temp_name(FINAL)), posixpath.join(folder, FINAL)
    with backend.fs.open_write(temp) as sink:
        writer = pq.ParquetWriter(sink, table.schema, compression="snappy")
        for start in range(0, rows, 100_000):
            writer.write_table(table.slice(start, 100_000), row_group_size=100_000)
        writer.close()
    assert publish(backend.fs, temp, final) is True
    assert backend.fs.info(final).size > 4 << 20
    with backend.fs.open_read(final) as f:
        parquet = pq.ParquetFile(f)
        assert parquet.metadata.num_row_groups == 3 and parquet.metadata.num_rows == rows
        assert parquet.read().equals(table)


def test_publish_is_true_once_then_false_with_the_temp_deleted(backend):
    final = backend.path("dt=2026-11-21", FINAL)
    assert publish(backend.fs, written_temp(backend, b"first"), final) is True
    second = written_temp(backend, b"first")
    assert publish(backend.fs, second, final) is False
    assert not backend.fs.exists(second)
    assert backend.fs.list_dir(backend.path("dt=2026-11-21")) == [FINAL]
    assert backend.read(final) == b"first"


def test_an_upload_aborted_then_deleted_leaves_no_file_behind(backend):
    """What the partition writer does with a failed file: abort its upload, then delete it. On a
    real HDFS an upload cut mid-body left the DataNode to create the file whenever it got to it,
    after the delete on 14 of 30 aborts: the upload must be settled when abort returns."""
    folder = backend.path("dt=2026-11-21")
    for _ in range(10):
        path = posixpath.join(folder, temp_name(FINAL))
        upload = backend.fs.open_write(path)
        upload.write(b"PAR1")
        getattr(upload, "abort", upload.close)()
        backend.fs.delete(path)
    assert backend.fs.list_dir(folder) == []


def test_the_partition_writer_writes_and_publishes_through_the_backend(backend):
    from tests.harness.data import event

    from etl.rows.decoders import make_decoder
    from etl.job.partition_writer import PartitionWriter, WriterSpec
    from etl.source.chunk import RawChunk
    from etl.model.schema import load_table_schema
    from tests.harness.paths import EVENTS_SCHEMA

    schema = load_table_schema(EVENTS_SCHEMA, None)
    spec = WriterSpec(schema, make_decoder("json", schema), None, 40, FileLayout())
    folder = backend.path("dt=2026-11-21")
    main_temp, rejected_temp = posixpath.join(folder, temp_name(FINAL)), posixpath.join(folder, "rej", temp_name(FINAL))
    with PartitionWriter(backend.fs, spec, "events", 3, main_temp, rejected_temp) as writer:
        writer.write(RawChunk(list(range(100)), [1_700_000_000_000] * 100, None, [event(i) for i in range(100)]))
        counts = writer.close()
    assert (counts.rows, counts.rejected, counts.row_groups) == (100, 0, 3)
    final = posixpath.join(folder, FINAL)
    assert publish(backend.fs, main_temp, final)
    with backend.fs.open_read(final) as f:
        assert pq.ParquetFile(f).read(columns=["kafka_offset"]).column(0).to_pylist() == list(range(100))
    assert backend.fs.info(final).size == counts.bytes_written

    aborted_temp = posixpath.join(folder, temp_name(FINAL))
    aborted = PartitionWriter(backend.fs, spec, "events", 3, aborted_temp, rejected_temp)
    aborted.write(RawChunk([100], [1_700_000_000_000], None, [event(100)]))
    aborted.abort()
    assert backend.fs.list_dir(folder) == [FINAL]


def test_the_backend_pickles_into_tasks(backend):
    path = backend.path("seen")
    backend.put(path, b"x")
    copy = pickle.loads(pickle.dumps(backend.fs))
    assert type(copy) is type(backend.fs) and copy.exists(path)


# -- WebHDFS only: retries, lost answers, errors ----------------------------------------------
@pytest.fixture
def webhdfs(server) -> Backend:
    fs = WebHdfsFileSystem(webhdfs_config(server.webhdfs_url("/warehouse")))
    fs.makedirs("/warehouse/t")
    return Backend("webhdfs", fs, "/warehouse/t", server)


def test_liststatus_is_retried_after_dropped_connections(webhdfs):
    webhdfs.put(webhdfs.path("a"), b"x")
    webhdfs.server.inject("LISTSTATUS", "drop", count=2)
    assert webhdfs.fs.list_dir(webhdfs.root) == ["a"]
    assert webhdfs.server.count("LISTSTATUS") == 3


def test_a_standby_namenode_answer_is_retried(webhdfs):
    before = webhdfs.server.count("GETFILESTATUS")
    webhdfs.server.inject("GETFILESTATUS", "remote:StandbyException")
    webhdfs.server.inject("GETFILESTATUS", "remote:RetriableException")
    assert webhdfs.fs.exists(webhdfs.root)
    assert webhdfs.server.count("GETFILESTATUS") - before == 3


def test_retries_are_bounded_and_the_error_says_what_failed(webhdfs):
    webhdfs.server.inject("LISTSTATUS", "drop", count=100)
    with pytest.raises(WarehouseError, match=r"LISTSTATUS /warehouse/t failed 3 times.*is up and reachable"):
        webhdfs.fs.list_dir(webhdfs.root)
    assert webhdfs.server.count("LISTSTATUS") == 3


def test_reads_are_retried_after_a_dropped_datanode_connection(webhdfs):
    webhdfs.put(webhdfs.path("f"), b"payload")
    webhdfs.server.inject("OPEN", "drop", phase="datanode")
    assert webhdfs.read(webhdfs.path("f")) == b"payload"
    assert webhdfs.server.count("OPEN", "datanode") == 2


def test_a_rename_whose_answer_was_lost_is_resolved_from_the_state_as_done(webhdfs):
    temp, final = written_temp(webhdfs, b"data"), webhdfs.path("dt=2026-11-21", FINAL)
    webhdfs.server.inject("RENAME", "drop_after")
    assert webhdfs.fs.rename_no_replace(temp, final) is True
    assert webhdfs.server.count("RENAME") == 1  # never sent again: the state said it was done
    assert webhdfs.read(final) == b"data" and not webhdfs.fs.exists(temp)


def test_a_lost_rename_answer_with_someone_elses_final_file_is_false(webhdfs):
    final = webhdfs.path("dt=2026-11-21", FINAL)
    webhdfs.fs.rename_no_replace(written_temp(webhdfs, b"winner"), final)
    loser = written_temp(webhdfs, b"loser")
    webhdfs.server.inject("RENAME", "drop_after")
    assert webhdfs.fs.rename_no_replace(loser, final) is False
    assert webhdfs.server.count("RENAME") == 2  # the winner's, and the loser's once
    assert webhdfs.read(final) == b"winner" and webhdfs.fs.exists(loser)


def test_a_rename_that_never_arrived_is_sent_again_only_after_checking_the_state(webhdfs):
    temp, final = written_temp(webhdfs, b"data"), webhdfs.path("dt=2026-11-21", FINAL)
    webhdfs.server.inject("RENAME", "drop")
    assert webhdfs.fs.rename_no_replace(temp, final) is True
    assert webhdfs.server.count("RENAME") == 2
    assert webhdfs.read(final) == b"data" and not webhdfs.fs.exists(temp)


def test_a_rename_that_keeps_failing_gives_up_leaving_the_temp_file(webhdfs):
    temp, final = written_temp(webhdfs, b"data"), webhdfs.path("dt=2026-11-21", FINAL)
    webhdfs.server.inject("RENAME", "drop", count=100)
    with pytest.raises(WarehouseError, match="not applied after 3 attempts"):
        webhdfs.fs.rename_no_replace(temp, final)
    assert webhdfs.server.count("RENAME") == 3
    assert webhdfs.fs.exists(temp) and not webhdfs.fs.exists(final)


def test_a_rename_with_no_answer_whose_state_cannot_be_read_names_the_rename(webhdfs):
    """A NameNode that stops answering (SIGSTOPped, in tests/integration/test_hdfs_faults.py) in
    the middle of a RENAME: the error names the RENAME, not only the state lookup that failed last."""
    temp, final = written_temp(webhdfs, b"data"), webhdfs.path("dt=2026-11-21", FINAL)
    webhdfs.server.inject("RENAME", "drop")
    webhdfs.server.inject("GETFILESTATUS", "drop", count=100)
    with pytest.raises(WarehouseError, match=r"^RENAME .* no answer .* could not be read either: GETFILESTATUS .* "
                                             r"failed 3 times"):
        webhdfs.fs.rename_no_replace(temp, final)


def test_a_rename_refused_by_a_standby_namenode_is_resolved_and_sent_again(webhdfs):
    temp, final = written_temp(webhdfs, b"data"), webhdfs.path("dt=2026-11-21", FINAL)
    webhdfs.server.inject("RENAME", "remote:StandbyException")
    assert webhdfs.fs.rename_no_replace(temp, final) is True
    assert webhdfs.server.count("RENAME") == 2


def test_create_is_never_sent_twice(webhdfs):
    path = webhdfs.path("_tmp.once")
    webhdfs.server.inject("CREATE", "drop")
    with pytest.raises(WarehouseError, match="CREATE is never sent twice"):
        webhdfs.fs.open_write(path)
    assert webhdfs.server.count("CREATE") == 1 and not webhdfs.fs.exists(path)


def test_a_failed_upload_raises_when_the_file_is_closed(webhdfs):
    path = webhdfs.path("_tmp.upload")
    webhdfs.server.inject("CREATE", "drop", phase="datanode")
    with pytest.raises(WarehouseError, match=r"upload to the DataNode\) failed"):
        f = webhdfs.fs.open_write(path)
        f.write(b"x" * 100)
        f.close()
    assert webhdfs.server.count("CREATE", "datanode") == 1


def test_leaving_a_with_block_by_an_exception_aborts_the_upload(webhdfs):
    path = webhdfs.path("_tmp.aborted")
    with pytest.raises(RuntimeError):
        with webhdfs.fs.open_write(path) as f:
            f.write(b"partial")
            raise RuntimeError("the writer failed")
    assert f.closed
    # The abort settled the upload before it returned (the body ended, the DataNode answered):
    # the partial file is there, and the partition writer's delete of it is final.
    assert webhdfs.fs.delete(path) is True
    assert webhdfs.fs.list_dir(webhdfs.root) == []


def test_remote_exceptions_map_to_errors_that_say_what_to_do(webhdfs):
    webhdfs.server.inject("GETFILESTATUS", "remote:AccessControlException")
    with pytest.raises(WarehouseError,
                       match=r"permission denied \(AccessControlException.*\[warehouse\] user \('etl'\)"):
        webhdfs.fs.exists(webhdfs.root)
    webhdfs.server.inject("MKDIRS", "remote:SafeModeException")
    with pytest.raises(WarehouseError, match="safe mode"):
        webhdfs.fs.makedirs(webhdfs.path("x"))


def test_a_denied_access_names_the_user_the_permission_and_the_folder_and_exits_1():
    """A real NameNode's answer when [warehouse] user may not write a folder (permissions on; seen
    in tests/integration/test_hdfs_faults.py): the error, of the ETL's root and not retryable,
    says who lacks which permission on which folder, and how to give it."""
    from hdfs.util import HdfsError

    from etl.errors import EXIT_BATCH_FAILED, EtlError, Retryable
    from etl.sink.fs.webhdfs_client import hdfs_error
    message = ('Permission denied: user=etl, access=WRITE, inode="/w/db.db/t":root:supergroup:drwxr-xr-x\n'
               '\tat org.apache.hadoop.hdfs.server.namenode.FSPermissionChecker.check(FSPermissionChecker.java:1)')
    error = hdfs_error(HdfsError(message, exception="AccessControlException"), "MKDIRS /w/db.db/t/dt=1",
                       "/w/db.db/t/dt=1", "Check [warehouse] user")
    assert isinstance(error, EtlError) and not isinstance(error, Retryable)
    assert error.exit_code == EXIT_BATCH_FAILED
    text = str(error)
    assert "MKDIRS /w/db.db/t/dt=1: permission denied: HDFS user etl lacks WRITE permission on /w/db.db/t " \
           "(owner root, group supergroup, drwxr-xr-x)" in text, text
    assert "hdfs dfs -chown -R etl /w/db.db/t" in text and "FSPermissionChecker" not in text, text


def test_an_exceeded_quota_says_so_and_how_to_raise_it_and_is_not_retryable(webhdfs):
    """A real NameNode's answer, when a folder's space quota cannot hold one more block, is
    seen in tests/integration/test_hdfs_faults.py; here the mapping of every quota exception."""
    from etl.errors import WarehouseUnavailable
    for name in ("DSQuotaExceededException", "NSQuotaExceededException", "QuotaByStorageTypeExceededException"):
        webhdfs.server.inject("CREATE", f"remote:{name}", phase="datanode")
        with pytest.raises(WarehouseError, match=r"quota.*hdfs dfsadmin -setSpaceQuota") as raised:
            webhdfs.put(webhdfs.path(f"_tmp.{name}"), b"x" * 100)
        assert not isinstance(raised.value, WarehouseUnavailable)  # only an operator can help


def test_the_datanode_refuses_to_overwrite_and_that_maps_to_path_exists(webhdfs):
    """The race open_write's check cannot close: the file appears between the two CREATE steps."""
    import requests

    from etl.sink.fs.webhdfs_client import remote_error
    path = webhdfs.path("raced")
    step1 = requests.put(f"{webhdfs.server.http_url}/webhdfs/v1{path}",
                         params={"op": "CREATE", "overwrite": "false", "user.name": "etl"}, allow_redirects=False)
    assert step1.status_code == 307
    webhdfs.put(path, b"the other writer")
    step2 = requests.put(step1.headers["Location"], data=b"mine")
    assert step2.status_code == 403
    assert isinstance(remote_error(step2, f"CREATE {path}", path, ""), PathExists)
    assert webhdfs.read(path) == b"the other writer"


def test_relative_paths_are_refused(webhdfs):
    with pytest.raises(WarehouseError, match="is not absolute"):
        webhdfs.fs.exists("warehouse/t")


def test_filesystem_for_picks_the_backend_from_the_url(server):
    assert isinstance(filesystem_for(WarehouseConfig(url="file:///tmp/w")), LocalFileSystem)
    assert isinstance(filesystem_for(webhdfs_config(server.webhdfs_url("/w"))), WebHdfsFileSystem)
    with pytest.raises(WarehouseError, match="unsupported warehouse url 's3://b/w'"):
        filesystem_for(WarehouseConfig(url="s3://b/w"))


def test_kerberos_without_its_package_is_a_config_error_naming_the_extra(server, monkeypatch):
    # scripts/setup --tests installs the kerberos extra (requirements/kerberos.txt): hide it, as on a
    # machine without it.
    monkeypatch.setitem(sys.modules, "hdfs.ext.kerberos", None)
    with pytest.raises(ConfigError, match=r"requests-kerberos.*kafka-hive-etl\[kerberos\]"):
        WebHdfsFileSystem(webhdfs_config(server.webhdfs_url("/w"), auth="kerberos", user=None))


# -- the local backend's rename, killed inside it ----------------------------------------------
def _rename_in_a_child(tmp_path, src: str, dst: str, **env: str) -> subprocess.CompletedProcess:
    code = ("import sys; from etl.sink.fs import LocalFileSystem; "
            "print(LocalFileSystem().rename_no_replace(sys.argv[1], sys.argv[2]))")
    return subprocess.run([sys.executable, "-c", code, src, dst], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **env},
                          start_new_session=True)


def test_a_local_move_between_visible_folders_killed_inside_it_leaves_the_file_under_one_name(tmp_path):
    """etl.ops.legacy_names moves a committed file from one registered partition's folder to
    another's: were both names there at once (a link, then an unlink, killed in between), a
    query would read its rows twice. SIGKILLed at the one step of the move that could be
    interrupted, the file is still under exactly one of its names, whole."""
    old, new = tmp_path / "dt=1-01-02" / "hour=05", tmp_path / "dt=0001-01-02" / "hour=05"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    (old / FINAL).write_bytes(b"range 0-250")
    done = _rename_in_a_child(tmp_path, str(old / FINAL), str(new / FINAL), ETL_FAULT_POINT="local:linked")
    names = [str(p.relative_to(tmp_path)) for p in sorted(tmp_path.rglob(FINAL))]
    assert names == [f"dt=0001-01-02/hour=05/{FINAL}"], (names, done.returncode, done.stderr[-500:])
    assert (new / FINAL).read_bytes() == b"range 0-250"


def test_without_renameat2_the_local_move_links_then_unlinks_and_still_never_overwrites(tmp_path, monkeypatch):
    import etl.sink.fs.local as local
    monkeypatch.setattr(local, "_renameat2", None)  # a C library or filesystem without RENAME_NOREPLACE
    fs, src, dst = LocalFileSystem(), str(tmp_path / "_tmp.a"), str(tmp_path / FINAL)
    Path(src).write_bytes(b"first")
    assert fs.rename_no_replace(src, dst) is True and not os.path.exists(src)
    Path(src).write_bytes(b"second")
    assert fs.rename_no_replace(src, dst) is False
    assert Path(dst).read_bytes() == b"first" and Path(src).read_bytes() == b"second"
