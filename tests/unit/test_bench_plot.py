"""scripts/bench.py --plot: the three charts from a benchmark's result dict, and a result that
lacks a measurement skips that chart, says so, and still draws the others."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

from tests.harness.paths import REPO
from tests.perf.plot import CHARTS, draw, draw_files

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAMES = {"bench-throughput.png", "bench-worker-memory.png", "bench-partition-scaling.png"}


def _path(seconds: list[float]) -> dict:
    return {"seconds": {"median": sorted(seconds)[1], "min": min(seconds), "max": max(seconds), "runs": seconds}}


def report() -> dict:
    """What a run of all three measurements reports, cut down to what the charts read."""
    scaling = []
    for n, plan, commit in ((10, 0.06, 0.004), (100, 0.07, 0.04), (1000, 0.36, 0.24)):
        batches = [{"batch": b, "phases": {"plan": plan * b, "commit": commit * b}} for b in (1, 2)]
        scaling.append({"partitions": n, "records_per_partition_per_batch": 3, "mode": "full job", "batches": batches})
    scaling.append({"partitions": 5000, "records_per_partition_per_batch": 3, "mode": "zookeeper-only",
                    "batches": [{"batch": 1, "timings": {"zk_reads": 0.1, "write_plan": 0.5, "commit": 1.1}}]})
    return {
        "run_id": "20261124T142055-abcdef", "argv": ["python", "scripts/bench.py", "--records", "500000"],
        "args": {"parallelism": 2}, "loadavg_at_end": [0.8, 0.9, 1.0], "load_waited_s": 15, "load_gate_gave_up": False,
        "host": {"cpus": 2, "memory_gib": 23.5, "python": "3.11.7", "pyspark": "4.0.0", "pyarrow": "18.0.0",
                 "loadavg_at_start": [0.5, 0.6, 0.7]},
        "data": {"records": 500_000, "value_bytes": 65_000_000, "partitions": 4, "decoder": "json"},
        "throughput": {"drain": _path([1.4, 1.5, 1.7]), "drain_read_range": _path([1.5, 1.6, 1.6]),
                       "full_batch": _path([1.9, 2.0, 2.4]), "row_by_row": _path([7.5, 8.0, 8.1]),
                       "ratios": {"full_batch_vs_drain": 0.75, "full_batch_vs_row_by_row": 4.0}},
        "memory": [{"records": n, "value_bytes": n * 130, "row_group_size": 100_000, "peak_worker_rss_mb": rss,
                    "worker_rss_before_mb": 90.0, "phases": {"batch": n / 130_000}}
                   for n, rss in ((1_000_000, 248.0), (4_000_000, 251.0))],
        "partition_scaling": scaling,
    }


def test_draws_the_three_charts(tmp_path):
    drawn = draw([report()], tmp_path / "images")
    assert {p.name for p in drawn} == NAMES
    for path in drawn:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, path


def test_a_missing_measurement_skips_its_chart_and_says_so(tmp_path, capsys):
    partial = copy.deepcopy(report())
    del partial["memory"]
    partial["partition_scaling"] = []
    drawn = draw([partial], tmp_path)
    assert [p.name for p in drawn] == ["bench-throughput.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench-throughput.png"]
    err = capsys.readouterr().err
    assert "no 'memory' measurement" in err and "bench-worker-memory.png not drawn" in err
    assert "no 'partition_scaling' measurement" in err


def test_charts_from_several_saved_files(tmp_path):
    """One file per measurement, as separate runs save them: each chart from the file that has it."""
    files = []
    for key, _name, _chart in CHARTS:
        one = {k: v for k, v in report().items() if k not in {c for c, _, _ in CHARTS} - {key}}
        files.append(tmp_path / f"{key}.json")
        files[-1].write_text(json.dumps(one))
    assert draw_files([str(f) for f in files], tmp_path / "out") == 0
    assert {p.name for p in (tmp_path / "out").iterdir()} == NAMES


def test_bench_plot_from_draws_without_spark(tmp_path):
    """The command line: --plot-from with --plot draws from a file and never reaches the stack."""
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(report()))
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "bench.py"), "--plot", str(tmp_path / "png"),
                           "--plot-from", str(saved)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in (tmp_path / "png").iterdir()} == NAMES
    refused = subprocess.run([sys.executable, str(REPO / "scripts" / "bench.py"), "--plot-from", str(saved)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--plot-from needs --plot DIR" in refused.stderr
