"""The Flink peer's helpers that need no JVM: its JSON lines, its hidden files, its command line."""
from __future__ import annotations

from pathlib import Path

from tests.perf import flink_peer


def test_said_and_event_read_the_jobs_json_lines_among_its_other_output():
    stdout = ('{"event": "started", "jvm_start_ms": 1, "ms": 2, "restored_from": null}\n'
              "SLF4J: something\n{not json\n"
              '{"event": "first_record", "ms": 5}\n'
              '{"event": "finished", "jvm_start_ms": 1, "first_record_ms": 5, "end_ms": 9}\n')
    assert [line["event"] for line in flink_peer.said(stdout)] == ["started", "first_record", "finished"]
    assert flink_peer.event(stdout, "finished")["end_ms"] == 9
    assert flink_peer.event(stdout, "nothing") is None


def test_hidden_files_tells_closed_pending_files_from_cut_ones(tmp_path: Path):
    bucket = tmp_path / "dt=2026-11-29" / "hour=12"
    bucket.mkdir(parents=True)
    (bucket / "part-a-0-0.snappy.parquet").write_bytes(b"PAR1" + b"x" * 10 + b"PAR1")  # finished: not hidden
    (bucket / ".part-b-0-1.snappy.parquet.inprogress.u1").write_bytes(b"PAR1" + b"x" * 10 + b"PAR1")
    (bucket / ".part-c-1-1.snappy.parquet.inprogress.u2").write_bytes(b"PAR1xx")
    (bucket / ".part-d-1-2.snappy.parquet.inprogress.u3").write_bytes(b"")
    assert flink_peer.hidden_files(tmp_path) == {"in_progress": 2, "complete_pending": 1, "bytes": 24}
    assert flink_peer.hidden_files(tmp_path / "missing") == {"in_progress": 0, "complete_pending": 0, "bytes": 0}


def test_the_job_command_is_bounded_only_when_asked(tmp_path: Path):
    unbounded = flink_peer.job_command("127.0.0.1:9092", "t", tmp_path / "o", tmp_path / "c", bounded=False)
    bounded = flink_peer.job_command("127.0.0.1:9092", "t", tmp_path / "o", tmp_path / "c", bounded=True)
    assert "--bounded" not in unbounded and bounded[-1] == "--bounded"
    assert f"-Xmx{flink_peer.HEAP}" in bounded and flink_peer.MAIN_CLASS in bounded
