"""The merged files of a partition: which committed files go into which output (etl.model.compaction
holds the plan itself, the record stored in ZooKeeper)."""
from __future__ import annotations

from etl.errors import StateConflict
from etl.model.compaction import InputFile, OutputFile
from etl.config.model import HiveFormat
from etl.model.naming import final_name, format_of_name


def plan_outputs(inputs: list[InputFile], target_bytes: int) -> tuple[OutputFile, ...]:
    """One merged file per Kafka partition, or several when its files hold more than
    `target_bytes`: consecutive files in offset order, each output named by its lowest start
    and highest end. Ranges that overlap are refused: the partition holds a copy (`etl verify`).
    A recreated topic's incarnations (etl.model.identity) are merged apart, each output named
    with its incarnation's tag: their offsets overlap, their records are others."""
    by_partition: dict[tuple[str, int, str], list[InputFile]] = {}
    for f in inputs:
        by_partition.setdefault(f.kafka_partition, []).append(f)
    outputs = []
    for (topic, partition, incarnation), files in sorted(by_partition.items()):
        files.sort(key=lambda f: f.ranges[0])
        _refuse_overlaps(topic, partition, files)
        group: list[InputFile] = []
        for f in files:
            if group and sum(g.size for g in group) + f.size > target_bytes:
                outputs.append(_output(topic, partition, incarnation, group))
                group = []
            group.append(f)
        outputs.append(_output(topic, partition, incarnation, group))
    return tuple(outputs)


def _output(topic: str, partition: int, incarnation: str, group: list[InputFile]) -> OutputFile:
    start, end = min(r[0] for f in group for r in f.ranges), max(r[1] for f in group for r in f.ranges)
    file_format = format_of_name(group[0].name) or HiveFormat.PARQUET  # the inputs', the table's
    return OutputFile(final_name(topic, partition, start, end, incarnation, file_format), tuple(f.name for f in group))


def _refuse_overlaps(topic: str, partition: int, files: list[InputFile]) -> None:
    ranges = sorted(r for f in files for r in f.ranges)
    for (a_start, a_end), (b_start, b_end) in zip(ranges, ranges[1:]):
        if b_start < a_end:
            raise StateConflict(f"{topic}[{partition}]: two files of the partition both hold offsets "
                                f"[{b_start}, {min(a_end, b_end)}); run `etl verify`, which names them, and "
                                f"compact after the overlap is resolved")
