"""The warehouse filesystem contract (tests/unit/test_fs_contract.py) on a REAL HDFS: Hadoop's
own NameNode and DataNode, started once per session by `scripts/local-stack up hdfs` (the
`hdfs` fixture), each test in a fresh folder of its own.

Why here and not in tests/unit: a NameNode is a service, and tests/unit needs none (it runs
without the stack). The contract's functions are imported from the unit module, so one suite
is written once and runs on three backends: the local filesystem and the WebHDFS protocol
server there, the real daemons here.

ETL_TEST_WEBHDFS_URL=webhdfs://namenode:port/scratch/folder runs the same tests against an
external cluster instead (ETL_TEST_WEBHDFS_USER, ETL_TEST_WEBHDFS_AUTH=kerberos and
ETL_TEST_WEBHDFS_PRINCIPAL as needed).

After the suite, what only a real NameNode can show: its answer to a RENAME onto an existing
file, which the whole commit protocol rests on.
"""
from __future__ import annotations

import inspect
import os
import posixpath
import uuid

import pytest
import requests

from etl.sink.fs.webhdfs import WebHdfsFileSystem
from tests.unit import test_fs_contract as contract
from tests.unit.test_fs_contract import Backend, webhdfs_config

CLUSTER_ENV = "ETL_TEST_WEBHDFS_URL"

# The contract's tests: every test of the unit module that takes the `backend` fixture.
CONTRACT_TESTS = sorted(name for name, test in vars(contract).items()
                        if name.startswith("test_") and "backend" in inspect.signature(test).parameters)
globals().update({name: getattr(contract, name) for name in CONTRACT_TESTS})


def _external_cluster() -> tuple[WebHdfsFileSystem, str] | None:
    url = os.environ.get(CLUSTER_ENV)
    if not url:
        return None
    auth = os.environ.get("ETL_TEST_WEBHDFS_AUTH", "simple")
    config = webhdfs_config(url.rstrip("/"), auth=auth,
                            user=os.environ.get("ETL_TEST_WEBHDFS_USER") if auth == "simple" else None,
                            kerberos_principal=os.environ.get("ETL_TEST_WEBHDFS_PRINCIPAL"))
    return WebHdfsFileSystem(config), posixpath.join(config.fs_root, f"etl-contract-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def cluster(request):
    """(filesystem, scratch folder's parent): the external cluster, else the shared local HDFS."""
    external = _external_cluster()
    if external is not None:
        return external
    hdfs = request.getfixturevalue("hdfs")
    return WebHdfsFileSystem(webhdfs_config(hdfs.webhdfs_url)), hdfs.job_folder("contract")


@pytest.fixture
def backend(cluster):
    fs, parent = cluster
    root = posixpath.join(parent, uuid.uuid4().hex[:12])
    fs.makedirs(root)
    try:
        yield Backend("hdfs", fs, root)
    finally:
        fs.client.delete(root, recursive=True)


def test_the_suite_is_the_unit_modules_contract():
    assert len(CONTRACT_TESTS) == 19, CONTRACT_TESTS  # a test added there runs here too


def test_webhdfs_rename_onto_an_existing_file_answers_false_and_keeps_both(backend):
    """What the no-replace rename rests on, asked of the NameNode itself: RENAME onto an existing
    file is {"boolean": false}, not an overwrite and not an error, and both files stay as they were."""
    src, dst = backend.path("_tmp.loser"), backend.path("final")
    backend.put(dst, b"the winner's bytes")
    backend.put(src, b"the loser's bytes")
    answer = requests.put(f"{backend.fs.warehouse.namenode_urls}/webhdfs/v1{src}",
                          params={"op": "RENAME", "destination": dst, "user.name": "etl"}, timeout=30)
    assert answer.status_code == 200 and answer.json() == {"boolean": False}
    assert backend.read(dst) == b"the winner's bytes"
    assert backend.read(src) == b"the loser's bytes"
    assert backend.fs.rename_no_replace(src, dst) is False  # the backend reads that answer the same way
    assert backend.read(dst) == b"the winner's bytes" and backend.read(src) == b"the loser's bytes"
