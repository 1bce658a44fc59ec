"""[compaction]: when `etl compact` (and `etl run` with after_run) merges a Hive
partition's small files into few large ones (etl.compaction.compactor).

Every key is optional; the section itself is too, and its defaults never compact during a run.
Parsed in etl.config.parse; kept apart from etl.config.model only for its size.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompactionConfig:
    # A merged file is closed at this size: a Kafka partition's files in a Hive partition become
    # one file, or several of about this size when they hold more.
    target_file_mb: int = 256
    min_files: int = 8  # a partition with fewer committed files is left alone
    # Only partitions whose `_SUCCESS` is written, or whose window closed more than
    # [hive] success_marker_delay_seconds ago; `etl compact --partition` overrides it.
    only_finished: bool = True
    # Replaced files stay where they were, readable by the queries already running, this long.
    keep_superseded_minutes: float = 60.0
    after_run: bool = False  # compact at the end of every `etl run`

    @property
    def target_bytes(self) -> int:
        return self.target_file_mb * 1024 * 1024

    @property
    def keep_superseded_seconds(self) -> float:
        return self.keep_superseded_minutes * 60.0
