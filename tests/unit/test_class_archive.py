"""The driver JVM's class archive (etl.hive.class_archive): when a command maps one, records one,
or starts without; and what is published. No JVM here: tests/integration/test_class_archive_runs.py
starts real ones."""
from __future__ import annotations

import os
import subprocess
import sys
import zlib

import pytest

from etl.config.jvm import JvmConfig, default_archive_dir
from etl.hive.class_archive import QUARANTINED, SUFFIX, archive_key, finish_recording, plan_archive, quarantine

SETTINGS = {"spark.master": "local[2]", "spark.driver.memory": "1g"}


def _jvm(tmp_path) -> JvmConfig:
    return JvmConfig(class_archive=True, class_archive_dir=tmp_path / "jvm")


def _exiting(code: int) -> subprocess.Popen:
    """A process that waits for EOF on its stdin, as pyspark's JVM does, then exits `code`."""
    return subprocess.Popen([sys.executable, "-c", f"import sys; sys.stdin.read(); sys.exit({code})"],
                            stdin=subprocess.PIPE)


def test_a_host_without_an_archive_records_one_and_only_one_process_records_at_a_time(tmp_path):
    first = plan_archive(_jvm(tmp_path), SETTINGS)
    assert first.recording is not None and "-XX:ArchiveClassesAtExit=" in first.java_options
    assert "-Xlog:cds*=off" in first.java_options  # the JVM's own words would land on the job's stdout
    assert plan_archive(_jvm(tmp_path), SETTINGS) is None  # the lock is held: start without one
    first.recording.write_bytes(b"x" * 1000)
    published = finish_recording(first, _exiting(0))
    checksum = f"{zlib.crc32(b'x' * 1000):08x}"  # of its bytes, checked before every mapping
    assert published == first.directory / f"{first.key}-1000-{checksum}{SUFFIX}" and published.stat().st_size == 1000
    assert not first.recording.exists()
    mapped = plan_archive(_jvm(tmp_path), SETTINGS)
    assert mapped.recording is None and mapped.java_options.startswith(f"-XX:SharedArchiveFile={published} ")


def test_an_archive_from_a_jvm_that_did_not_exit_cleanly_is_not_kept(tmp_path):
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    plan.recording.write_bytes(b"x" * 1000)
    assert finish_recording(plan, _exiting(1)) is None
    assert list(plan.directory.glob(f"*{SUFFIX}")) == [] and not plan.recording.exists()
    assert plan_archive(_jvm(tmp_path), SETTINGS).recording is not None  # the lock was released: try again


def test_an_archive_whose_size_differs_from_its_name_is_deleted_not_mapped(tmp_path):
    """The JVM crashes (SIGBUS) on a truncated archive: it must never be given one."""
    directory = tmp_path / "jvm"
    directory.mkdir()
    truncated = directory / f"{archive_key(SETTINGS, JvmConfig())}-5000-{zlib.crc32(b'x' * 1000):08x}{SUFFIX}"
    truncated.write_bytes(b"x" * 1000)
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    assert plan.recording is not None and not truncated.exists()


def _published(tmp_path, content: bytes):
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    plan.recording.write_bytes(content)
    return finish_recording(plan, _exiting(0))


@pytest.mark.parametrize("where", ["body", "header"])
def test_an_archive_damaged_in_place_is_moved_aside_with_a_warning_and_recorded_anew(tmp_path, caplog, where):
    """Same size, other bytes: the JVM crashed (SIGSEGV) on a damaged body at every start, and
    ignored a damaged header at every start; the size alone never told."""
    content = bytearray(os.urandom(100_000))
    archive = _published(tmp_path, bytes(content))
    at = 50_000 if where == "body" else 0
    content[at:at + 16] = bytes(b ^ 0xFF for b in content[at:at + 16])
    archive.write_bytes(bytes(content))
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    assert plan.recording is not None and plan.mapped is None  # starts without it, and records a new one
    aside = archive.with_name(archive.name + QUARANTINED)
    assert not archive.exists() and aside.read_bytes() == bytes(content)
    assert f"class archive {archive} is damaged" in caplog.text and str(aside) in caplog.text


def test_a_whole_archive_is_mapped_and_known_as_mapped(tmp_path):
    archive = _published(tmp_path, os.urandom(10_000))
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    assert plan.mapped == archive and plan.recording is None
    assert f"-XX:SharedArchiveFile={archive} " in plan.java_options
    # Should the JVM still crash on it, its hs_err report goes to the archive's folder, not into
    # the command's current folder.
    assert f"-XX:ErrorFile={archive.parent}/hs_err_pid%p.log" in plan.java_options


def test_an_archive_the_jvm_crashed_on_is_moved_aside_and_only_one_is_kept_aside(tmp_path, caplog):
    first = _published(tmp_path, os.urandom(10_000))
    quarantine(first, "made the driver JVM exit while it started")
    second = _published(tmp_path, os.urandom(20_000))
    quarantine(second, "made the driver JVM exit while it started")
    assert list(first.parent.glob(f"*{QUARANTINED}")) == [second.with_name(second.name + QUARANTINED)]
    assert f"the class archive {second} made the driver JVM exit while it started" in caplog.text
    quarantine(second, "again")  # moved aside by another process meanwhile: nothing to do


def test_an_archive_without_a_checksum_in_its_name_is_deleted_not_mapped(tmp_path):
    """Archives published before the checksum: their bytes cannot be checked."""
    directory = tmp_path / "jvm"
    directory.mkdir()
    old = directory / f"{archive_key(SETTINGS, JvmConfig())}-1000{SUFFIX}"
    old.write_bytes(b"x" * 1000)
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    assert plan.recording is not None and not old.exists()


def test_a_partial_archive_left_by_a_killed_process_is_removed_by_the_next_recorder(tmp_path):
    directory = tmp_path / "jvm"
    directory.mkdir()
    leftover = directory / f"{archive_key(SETTINGS, JvmConfig())}.99999999.partial"
    leftover.write_bytes(b"half")
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    assert plan.recording != leftover and not leftover.exists()


def test_the_archive_depends_on_the_driver_settings_not_on_the_others():
    assert archive_key(SETTINGS, JvmConfig()) == \
        archive_key({**SETTINGS, "spark.sql.shuffle.partitions": "8"}, JvmConfig())
    assert archive_key(SETTINGS, JvmConfig()) != \
        archive_key({**SETTINGS, "spark.driver.memory": "40g"}, JvmConfig())  # no compressed oops
    assert archive_key(SETTINGS, JvmConfig()) != \
        archive_key({**SETTINGS, "spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}, JvmConfig())


def test_the_default_folder_is_the_users_cache():
    assert default_archive_dir({"XDG_CACHE_HOME": "/var/cache/me"}) == \
        default_archive_dir({"XDG_CACHE_HOME": "/var/cache/me", "HOME": "/x"})
    assert str(default_archive_dir({"XDG_CACHE_HOME": "/var/cache/me"})) == "/var/cache/me/kafka-hive-etl/jvm"
    assert str(default_archive_dir({})).endswith(os.path.join(".cache", "kafka-hive-etl", "jvm"))


# -- [jvm] ----------------------------------------------------------------------------------------
def _load_jvm(tmp_path, lines: str | None):
    from etl.config import load_config
    from tests.harness.config_file import minimal_ini
    from tests.harness.paths import EVENTS_SCHEMA
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA, sections=f"[jvm]\n{lines}\n" if lines is not None else ""))
    return load_config(path).jvm


def test_without_the_section_the_archive_is_on_in_the_users_cache(tmp_path):
    assert _load_jvm(tmp_path, None) == JvmConfig(class_archive=True, class_archive_dir=None)
    assert _load_jvm(tmp_path, f"class_archive = false\nclass_archive_dir = {tmp_path}") == \
        JvmConfig(class_archive=False, class_archive_dir=tmp_path)


@pytest.mark.parametrize("line, message", [
    ("class_archive = maybe", r"\[jvm\] class_archive: 'maybe' is not valid: write true or false"),
    ("class_archive_dir = cache/jvm", r"\[jvm\] class_archive_dir: .*must be an absolute path"),
    ("class_archives = true", r"\[jvm\] class_archives: unknown key; known keys in \[jvm\]"),
])
def test_a_bad_jvm_key_names_itself_and_exits_2(tmp_path, line, message):
    from etl.errors import EXIT_USAGE, ConfigError
    with pytest.raises(ConfigError, match=message) as caught:
        _load_jvm(tmp_path, line)
    assert caught.value.exit_code == EXIT_USAGE


def test_an_archive_that_cannot_be_published_is_a_warning_at_exit_not_a_traceback(tmp_path, monkeypatch, caplog):
    plan = plan_archive(_jvm(tmp_path), SETTINGS)
    plan.recording.write_bytes(b"x" * 1000)

    def cross_device(source, target):
        raise OSError(18, "Invalid cross-device link")
    monkeypatch.setattr(os, "link", cross_device)
    assert finish_recording(plan, _exiting(0)) is None
    assert "could not be kept" in caplog.text and not plan.recording.exists()
    assert list(plan.directory.glob(f"*{SUFFIX}")) == []
