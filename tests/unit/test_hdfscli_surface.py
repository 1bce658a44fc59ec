"""What the WebHDFS backend takes from HdfsCLI (the `hdfs` package), pinned.

The backend goes through HdfsCLI's public API (status, list, makedirs, delete, rename, read)
wherever it can. Two private names are left, for CREATE, because the public `write()` cannot
serve (see etl/sink/fs/webhdfs_client.py): `_create` (the NameNode step) and `_request` (the
DataNode upload). These tests fail when the code reaches for any other private name, or when
an HdfsCLI release changes the two it keeps: then re-read webhdfs_client.py before moving the
pin in pyproject.toml.
"""
from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from pathlib import Path

import hdfs
from packaging.specifiers import SpecifierSet

import etl.sink.fs.webhdfs_client as webhdfs_client

FS_PACKAGE = Path(webhdfs_client.__file__).parent
PINNED = SpecifierSet(">=2.7.3,<2.8")


def _private_names_of_hdfscli() -> set[str]:
    return {name for name in dir(hdfs.InsecureClient) if name.startswith("_") and not name.startswith("__")}


def test_the_backend_uses_no_private_hdfscli_name_but_the_two_it_declares():
    private = _private_names_of_hdfscli()
    used = set()
    for source in FS_PACKAGE.glob("*.py"):
        for name in re.findall(r"[.\"'](_[a-z][a-z_]*)\b", source.read_text()):
            if name in private:
                used.add(name)
    assert used == set(webhdfs_client.HDFSCLI_PRIVATE_NAMES) == {"_create", "_request"}


def test_the_installed_hdfscli_is_inside_the_pin_and_the_pin_is_the_projects():
    assert version("hdfs") in PINNED
    pyproject = (FS_PACKAGE.parents[2] / "pyproject.toml").read_text()
    assert '"hdfs>=2.7.3,<2.8"' in pyproject


def test_the_two_private_names_still_have_the_shape_the_backend_relies_on():
    create = hdfs.InsecureClient._create
    assert create.__name__ == "create_handler"  # built by HdfsCLI's _Request('PUT', allow_redirects=False)
    assert list(inspect.signature(create).parameters)[:4] == ["client", "hdfs_path", "data", "strict"]
    assert list(inspect.signature(hdfs.InsecureClient._request).parameters)[:3] == ["self", "method", "url"]
    # The public write() would stream through AsyncWriter, whose queue has no bound; the
    # backend's own upload exists because of that: if HdfsCLI bounds it, reconsider.
    assert "Queue()" in inspect.getsource(hdfs.util.AsyncWriter.__enter__)


def test_the_public_answers_the_backend_reads_are_still_worded_as_it_expects():
    """rename() raises for WebHDFS's {"boolean": false} with these words and no RemoteException
    name, and a 401 is 'Authentication failure': webhdfs_client tells both apart by them."""
    from hdfs.util import HdfsError
    assert "'Unable to rename %r to %r.'" in inspect.getsource(hdfs.Client.rename)
    assert webhdfs_client.is_rename_refused(HdfsError("Unable to rename %r to %r.", "/a", "/b"))
    assert not webhdfs_client.is_rename_refused(HdfsError("Unable to rename", exception="AccessControlException"))
    assert "'Authentication failure. Check your credentials.'" in inspect.getsource(hdfs.client._to_error)
