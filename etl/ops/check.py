"""`etl check`: the job's lag as a Nagios plugin reports it, for Nagios, Icinga, Sensu or any
runner of monitoring plugins.

One line on stdout, `ETL <STATE> - <what> | <perfdata>`, and the plugin's exit code: 0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN. The state follows the largest lag of any partition: above
--warn-lag it is WARNING, above --crit-lag CRITICAL. UNKNOWN is every case where the lag could
not be read (a bad config or command line, ZooKeeper or Kafka not answering, damaged state),
so that a check never reads as OK, or as a lag alarm, when it knows nothing.

It writes nothing: it reads the committed offsets without creating the job's nodes, and the
watermarks from Kafka (`etl status --max-lag` exits 3 when over, which a plugin runner would
read as UNKNOWN: hence this command).

A topic with committed offsets that the routes can no longer load (etl.ops.status) is UNKNOWN,
naming it and why, whatever the lag: every run refuses it, as it refuses a bad config; its
partitions count in the lag and the perfdata.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from etl.config import Config
from etl.model.routes import Unroutable
from etl.ops.status import JobLag, PartitionStatus, asked_once, read_job_lag
from etl.source.kafka import KafkaMetadata
from etl.state.protocols import OffsetPart

LABEL = "ETL"


class NagiosState(IntEnum):
    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


@dataclass(frozen=True)
class CheckResult:
    state: NagiosState
    line: str


def run_check(config: Config, warn_lag: int, crit_lag: int) -> CheckResult:
    # Here, not at the top: etl.cli imports this module for every command, and the context
    # brings the job's modules (pyarrow, the decoders) that only the commands that run need.
    from etl.context.job import JobContext
    with JobContext(config, create_nodes=False, retry=asked_once(config)) as context:
        lags = read_lags(context.store.offsets, context.kafka)
        return judge(config.job.name, lags.partitions, warn_lag, crit_lag, lags.not_loadable)


def read_lags(store: OffsetPart, kafka: KafkaMetadata) -> JobLag:
    """Each partition's lag, as `etl status` counts it (from the earliest offset where the job has
    committed none): the loaded topics', and those of the topics the routes can no longer load."""
    return read_job_lag(kafka, {tp: c.value for tp, c in store.committed_offsets().items()})


def judge(job: str, lags: list[PartitionStatus], warn_lag: int, crit_lag: int,
          not_loadable: tuple[Unroutable, ...] = ()) -> CheckResult:
    """The state, and the plugin's line with perfdata (max_lag and total_lag, in records, with the
    thresholds, so that a grapher draws them). `not_loadable`: UNKNOWN, named first."""
    total = sum(p.lag for p in lags)
    worst = max(lags, key=lambda p: p.lag, default=None)
    most = 0 if worst is None else worst.lag
    state = (NagiosState.UNKNOWN if not_loadable else NagiosState.CRITICAL if most > crit_lag
             else NagiosState.WARNING if most > warn_lag else NagiosState.OK)
    if worst is None:
        what = f"job {job}: no partition to load"
    else:
        what = (f"job {job}: max lag {most} records ({worst.topic}[{worst.partition}]), total lag {total} "
                f"over {len(lags)} partitions")
        if state in (NagiosState.WARNING, NagiosState.CRITICAL):
            over = crit_lag if state is NagiosState.CRITICAL else warn_lag
            what += f"; {sum(1 for p in lags if p.lag > over)} above {over}"
    if not_loadable:
        stuck = "; ".join(f"topic {u.topic} has committed offsets and cannot be loaded: {u.why}" for u in not_loadable)
        what = f"job {job}: {stuck}; every run refuses (exit 2) until the routes are mended; " + \
            what.removeprefix(f"job {job}: ")
    perfdata = f"max_lag={most};{warn_lag};{crit_lag};0; total_lag={total};;;0;"
    return CheckResult(state, f"{LABEL} {state.name} - {what} | {perfdata}")


def unknown(reason: str) -> CheckResult:
    """What the check says when it cannot tell (a plugin's UNKNOWN), on one line."""
    return CheckResult(NagiosState.UNKNOWN, f"{LABEL} UNKNOWN - {' '.join(reason.split())}")
