"""The benchmark's results as PNG charts: throughput by path, peak Python worker RSS by
partition-batch size, plan and commit time by number of partitions.

Every function takes the report dict that scripts/bench.py builds (and --json-out writes), so
the charts can be drawn right after a run or later from saved files without Spark. Each chart
carries the machine and the run's parameters in a footnote: a figure means little without them."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.perf.common import MB, say

DPI = 100
PHASE_COLORS = {"plan": "tab:blue", "commit": "tab:orange"}
PATHS = (("drain", "drain\n(consume + count)", "0.6"),
         ("drain_read_range", "drain + chunk\n(etl read_range)", "0.6"),
         ("full_batch", "full etl batch\n(plan .. commit)", "tab:blue"),
         ("full_batch_librdkafka_defaults", "full batch,\nlibrdkafka's defaults", "tab:cyan"),
         ("row_by_row", "row by row\n(json.loads, createDataFrame)", "tab:orange"))


def _pyplot():
    """matplotlib on the Agg backend (no display), imported only when a chart is drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def during(measurements: list[dict]) -> str:
    """The 1-minute load before, and the CPU other processes used during, the measurements drawn."""
    loads = [m["loadavg_before"][0] for m in measurements if m.get("loadavg_before")]
    foreign = [m["foreign_cpu_cores"] for m in measurements if m.get("foreign_cpu_cores") is not None]
    if not loads:
        return ""
    return (f"; before each measurement the 1-min load was {min(loads):.2f}-{max(loads):.2f}, other processes used "
            f"{min(foreign):.2f}-{max(foreign):.2f} CPU cores meanwhile")


def footnote(report: dict, measured: str = "") -> str:
    """The machine, the versions, the load and the command of one run, as the chart's footnote."""
    host, args = report["host"], report.get("args", {})
    memory = f", {host['memory_gib']:.0f} GiB RAM" if host.get("memory_gib") else ""
    start, end = host.get("loadavg_at_start"), report.get("loadavg_at_end")
    load = f"load average (1 min) {start[0]:.2f} at start, {end[0]:.2f} at end" if start and end else ""
    waited = f", waited {report.get('load_waited_s', 0):.0f}s for a quiet machine" if load else ""
    gave_up = " (gave up waiting: measured under load)" if report.get("load_gate_gave_up") else ""
    machine = (f"run {report['run_id']}: {host['cpus']} CPUs{memory}, Python {host['python']}, Spark "
               f"{host['pyspark']} local[{args.get('parallelism', '?')}], pyarrow {host['pyarrow']}; "
               f"{load}{waited}{gave_up}{measured}")
    command = "command: " + " ".join(report.get("argv", ["?"]))
    return "\n".join(textwrap.wrap(machine, 140) + textwrap.wrap(command, 140))


def _finish(fig, report: dict, path: Path, measurements: list[dict]) -> Path:
    note = footnote(report, during(measurements))
    lines = note.count("\n") + 1
    fig.text(0.01, 0.01, note, fontsize=7, color="0.35", va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.035 * lines, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)
    return path


def throughput_chart(report: dict, path: Path) -> Path:
    """Records/s of each path (medians), with the range over the repetitions as error bars."""
    plt = _pyplot()
    t, data = report["throughput"], report["data"]
    records = data["records"]
    paths = [(key, label, color) for key, label, color in PATHS if key in t]  # older reports lack some
    labels, rates, low, high = [], [], [], []
    for key, label, _color in paths:
        seconds = t[key]["seconds"]
        labels.append(label)
        rates.append(records / seconds["median"])
        low.append(rates[-1] - records / seconds["max"])
        high.append(records / seconds["min"] - rates[-1])
    fig, ax = plt.subplots(figsize=(8, 4.6))
    bars = ax.barh(labels, rates, xerr=[low, high], color=[color for *_, color in paths], capsize=4)
    for bar, key, value, above in zip(bars, (key for key, *_ in paths), rates, high):
        ax.text(value + above + max(rates) * 0.02, bar.get_y() + bar.get_height() / 2,
                f"{value / 1000:,.0f}K/s ({t[key]['seconds']['median']:.2f} s)", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, max(r + h for r, h in zip(rates, high)) * 1.3)
    ax.xaxis.set_major_formatter(lambda value, _pos: f"{value / 1000:,.0f}K")
    ax.set_xlabel("records per second (median; error bars: fastest and slowest repetition)")
    r = t["ratios"]
    ax.set_title(f"Throughput by path: {records:,} {data['decoder']} records ({data['value_bytes'] / MB:.0f} MB), "
                 f"{data['partitions']} partitions, {len(t['full_batch']['seconds']['runs'])} repetitions\n"
                 f"full batch = {r['full_batch_vs_drain']:.2f}x the drain, "
                 f"{r['full_batch_vs_row_by_row']:.1f}x row by row", fontsize=10)
    runs = [{"loadavg_before": [load], "foreign_cpu_cores": cores} for key, *_ in paths
            for load, cores in zip(t[key].get("loadavg_before", []), t[key].get("foreign_cpu_cores", []))]
    return _finish(fig, report, path, runs)


def memory_chart(report: dict, path: Path) -> Path:
    """Peak RSS of the largest Spark Python worker during one partition-batch of each size."""
    plt = _pyplot()
    runs = report["memory"]
    labels = [f"{m['records']:,} records\n({m['value_bytes'] / MB:,.0f} MB of values)" for m in runs]
    fig, ax = plt.subplots(figsize=(8, 4.6))
    peaks = [m["peak_worker_rss_mb"] for m in runs]
    bars = ax.bar(labels, peaks, color="tab:blue", width=0.5, label="peak worker RSS during the batch")
    before = [(label, m["worker_rss_before_mb"]) for label, m in zip(labels, runs) if m.get("worker_rss_before_mb")]
    if before:  # 0: no worker was alive yet when the batch started
        ax.scatter(*zip(*before), color="0.3", marker="_", s=900, zorder=3, label="worker RSS before the batch")
    for bar, m in zip(bars, runs):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() * 1.01,
                f"{m['peak_worker_rss_mb']:.0f} MB\nbatch {m['phases']['batch']:.1f} s", ha="center", va="bottom",
                fontsize=9)
    ax.set_ylim(0, max(peaks) * 1.45)
    ax.set_ylabel("MB (RSS of the largest Python worker)")
    ax.legend(loc="upper left", fontsize=8, markerscale=0.4)
    growth = runs[-1]["peak_worker_rss_mb"] / runs[0]["peak_worker_rss_mb"] if runs[0]["peak_worker_rss_mb"] else 0
    ax.set_title(f"Peak Python worker RSS by partition-batch size (one partition, row_group_size "
                 f"{runs[0]['row_group_size']:,})\n{runs[-1]['records'] // runs[0]['records']}x the records: "
                 f"{growth:.2f}x the peak RSS", fontsize=10)
    return _finish(fig, report, path, runs)


def _scaling_series(entry: dict) -> list[tuple[str, float, float]]:
    """(label, plan s, commit s) per batch of one partition count; ZooKeeper-only rows have no
    Job plan phase, so their plan is the ZooKeeper reads plus the plan write."""
    if entry["mode"] == "zookeeper-only":
        return [(f"batch {b['batch']} (ZooKeeper only)", b["timings"]["zk_reads"] + b["timings"]["write_plan"],
                 b["timings"]["commit"]) for b in entry["batches"]]
    return [(f"batch {b['batch']}", b["phases"]["plan"], b["phases"]["commit"]) for b in entry["batches"]]


def scaling_chart(report: dict, path: Path) -> Path:
    """Plan and commit seconds against the number of partitions, one line per batch, log-log."""
    plt = _pyplot()
    entries = report["partition_scaling"]
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for entry in entries:
        for label, plan, commit in _scaling_series(entry):
            series.setdefault(("plan", label), []).append((entry["partitions"], plan))
            series.setdefault(("commit", label), []).append((entry["partitions"], commit))
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for (phase, label), points in sorted(series.items(), key=lambda item: (item[0][0] != "plan", item[0][1])):
        xs, ys = zip(*points)
        style = ":" if "ZooKeeper" in label else "--" if label.startswith("batch 2") else "-"
        ax.plot(xs, ys, marker="o" if phase == "plan" else "s", linestyle=style, color=PHASE_COLORS[phase],
                alpha=1.0 if style == "-" else 0.7, label=f"{phase}, {label}")
        first = label.startswith("batch 1")  # batch 1's figures right of the points, the others' left
        for x, y in points:
            ax.annotate(f"{y:.3f}", (x, y), textcoords="offset points", fontsize=7, color=PHASE_COLORS[phase],
                        ha="left" if first else "right",
                        xytext=(5 if first else -5, 4 if phase == "plan" else -10))
    ax.set_xscale("log")
    ax.set_yscale("log")
    counts = [e["partitions"] for e in entries]
    ax.set_xlim(min(counts) / 1.8, max(counts) * 1.8)  # room for the figures beside the points
    low, high = ax.get_ylim()
    ax.set_ylim(low / 1.5, high * 1.5)
    ax.set_xticks(counts, [f"{n:,}" for n in counts])
    ax.set_xlabel("partitions in the topic (one offset range each)")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8)
    modes = sorted({e["mode"] for e in entries})
    ax.set_title(f"Plan and commit time by number of partitions ({', '.join(modes)}; "
                 f"{entries[0]['records_per_partition_per_batch']} records per partition per batch)\n"
                 "batch 1 creates the offsets, batch 2 updates them; the commit is one ZooKeeper transaction",
                 fontsize=10)
    return _finish(fig, report, path, [b for e in entries for b in e["batches"]])


CHARTS = (("throughput", "bench-throughput.png", throughput_chart),
          ("memory", "bench-worker-memory.png", memory_chart),
          ("partition_scaling", "bench-partition-scaling.png", scaling_chart))


def draw(reports: list[dict], out_dir: Path) -> list[Path]:
    """Every chart whose measurement one of `reports` holds (the last one that holds it), into
    out_dir; a measurement no report holds is named and skipped."""
    drawn = []
    for key, name, chart in CHARTS:
        holders = [r for r in reports if r.get(key)]
        if not holders:
            say(f"plot: no '{key}' measurement in the results: {name} not drawn")
            continue
        drawn.append(chart(holders[-1], Path(out_dir) / name))
        say(f"plot: {drawn[-1]}")
    return drawn


def draw_files(files: list[str], out_dir: Path) -> int:
    """The charts from saved --json-out files; 0 if at least one was drawn, else 1."""
    reports = [json.loads(Path(f).read_text()) for f in files]
    return 0 if draw(reports, out_dir) else 1
