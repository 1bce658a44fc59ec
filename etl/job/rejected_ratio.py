"""[job] max_rejected_ratio, checked once a batch's files are written and before WRITTEN is stored."""
from __future__ import annotations

from etl.config import Config
from etl.errors import RejectedRatioExceeded
from etl.model.batch import Batch


def check_rejected_ratio(config: Config, batch: Batch, rows: int, rejected: int) -> None:
    total = rows + rejected
    limit = config.job.max_rejected_ratio
    if total and rejected / total > limit:
        raise RejectedRatioExceeded(
            f"batch {batch.batch_id}: {rejected} of {total} records ({rejected / total:.1%}) could not be "
            f"decoded, more than max_rejected_ratio={limit}. They are in table "
            f"{config.hive.database}.{config.hive.rejected_table}, partition "
            f"{batch.partition_values} (columns error, raw_value). Fix the producer or the decoder; to "
            f"accept this batch as it is, raise [job] max_rejected_ratio and run again: the batch "
            f"resumes with the same files and nothing is lost")
