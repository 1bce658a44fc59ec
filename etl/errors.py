"""Every error the ETL raises on purpose derives from EtlError.

Each error carries an exit code for the CLI and says what is wrong and what the operator
can do about it. Which failures are worth retrying is plain data (RETRYABLE_*), so that
retry policies never guess. The exit codes are the scheduler's contract (EXIT_CODES, shown by
`etl --help`): a failure that a later run will get past by itself derives from Retryable (75),
one that needs an operator keeps EtlError's 1.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_BATCH_FAILED = 1
EXIT_USAGE = 2
EXIT_LAG_ABOVE_MAX = 3
EXIT_RETRYABLE = 75  # EX_TEMPFAIL in sysexits.h

EXIT_CODES = (
    (EXIT_OK, "success, also when there was nothing new to load"),
    (EXIT_BATCH_FAILED, "failed, needs an operator: running again will not help (rejected ratio exceeded, "
                        "dimension changed, state conflict, missing files, verify found problems, ...)"),
    (EXIT_USAGE, "usage or config error; nothing was touched"),
    (EXIT_LAG_ABOVE_MAX, "etl status --max-lag N: some partition's lag is above N (etl check exits as a Nagios "
                         "plugin instead: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)"),
    (EXIT_RETRYABLE, "failed, running again will help: ZooKeeper, Kafka, the metastore, the warehouse or the "
                     "Schema Registry did not answer, or the job lock was lost. An open batch is resumed by "
                     "the next run"),
    ("N", "etl run --lock-held-exit-code N (default 0): another run holds the job's lock; nothing was done"),
)


class EtlError(Exception):
    """Root of the ETL's own errors. `exit_code` is what the CLI exits with."""

    exit_code = EXIT_BATCH_FAILED


class Retryable(EtlError):
    """A failure of something the job depends on, not of the data or the state: the same run
    later gets past it. Whatever was under way stays recorded and the next run resumes it."""

    exit_code = EXIT_RETRYABLE


class LockHeld(EtlError):
    """Another run holds the job's lock; this one did nothing. The CLI exits with
    --lock-held-exit-code (0 unless asked otherwise)."""

    exit_code = EXIT_OK


class ConfigError(EtlError):
    """The config file is missing, malformed, or has a bad key. Nothing was touched."""

    exit_code = EXIT_USAGE


class RollupRefused(ConfigError):
    """A rollup's partials would not add up to its table: its section computes them another way
    than the files its partials table holds, or its table holds rows loaded before it existed."""


class SchemaError(ConfigError):
    """A warehouse_schema DDL file cannot be used."""


class ZooKeeperAccessDenied(ConfigError):
    """ZooKeeper refused the [zookeeper] credentials, or the job's znodes are not protected the
    way [zookeeper] auth says. Nothing was touched."""


class Refused(EtlError):
    """`etl reset-offsets` or `etl bind` will not do what it was asked as asked: a flag it needs is
    missing, or what it would do loses or duplicates records. Its message gives each reason, what
    gets past it, and that nothing was changed."""

    exit_code = EXIT_USAGE

    def __init__(self, *reasons: str):
        said = "; ".join(reasons)
        super().__init__(said if said.endswith("nothing changed") else f"{said}; nothing changed")
        self.reasons = reasons


class RefusedUntilDone(Refused):
    """An operator command must wait for what is under way in the job's state (an open batch, a
    run holding the job lock) to finish, by `etl run` or `etl recover`. Nothing was changed."""

    exit_code = EXIT_BATCH_FAILED


class TopicNotFound(EtlError):
    """A configured topic does not exist on the brokers."""


class KafkaUnavailable(Retryable):
    """The brokers did not answer within the configured retries."""


class KafkaAccessDenied(ConfigError):
    """A broker answered, and the handshake failed on credentials: it refused the [kafka] SASL
    credentials, or the client refused its certificate (not signed by the CA in ssl.ca.location,
    not valid for the host name the job gives, expired). Retrying cannot help; the message says
    which key or certificate to fix. Nothing was read or written."""


class KafkaNotAuthorized(EtlError):
    """The broker's ACLs refused the job's principal an operation it needs: DESCRIBE or READ on a
    topic, READ on the consumer group it mirrors its offsets to. An operator must grant it, so
    running again will not help until then; nothing was loaded."""


class KafkaReadError(EtlError):
    """A task could not read its planned offset range."""


class KafkaStalled(KafkaReadError, Retryable):
    """A task's reads made no progress within [kafka] fetch_timeout_seconds: the broker is down
    or unreachable."""


class OffsetOutOfRange(EtlError):
    """A committed or planned offset is outside what Kafka still holds."""


class LockLost(Retryable):
    """This run no longer owns the job lock (its ZooKeeper session expired or was taken over)."""


class StateConflict(EtlError):
    """ZooKeeper state is not what this run expected; a commit was refused."""


class StateDamaged(StateConflict):
    """A znode of the job's state in ZooKeeper is missing, unreadable, or not what was written
    (its checksum differs): a hand edit or a damaged ZooKeeper. The message names the node and
    what to do (docs/operating.md, "Damage in ZooKeeper"); nothing was read on or written."""


class MissingBatchFiles(EtlError):
    """A batch's planned files are not all present after its tasks ran."""


class RejectedRatioExceeded(EtlError):
    """Too many records of a batch could not be decoded."""


class SchemaRegistryUnavailable(Retryable):
    """The Schema Registry did not answer (or answered 5xx) within the configured retries. The
    batch fails and stays open; records are never rejected for it."""


class SchemaRegistryRefused(EtlError):
    """The Schema Registry refused a request for a reason a retry will not change (credentials,
    permissions, a malformed request)."""


class HiveError(EtlError):
    """A Hive metastore operation failed, or its answer needs an operator (a partition registered
    at another location than the job writes it to)."""


class HiveUnavailable(HiveError, Retryable):
    """The Hive metastore could not be reached or did not answer in time."""


class WarehouseError(EtlError):
    """A warehouse filesystem operation failed or returned an unexpected result."""


class WarehouseUnavailable(WarehouseError, Retryable):
    """The warehouse filesystem did not answer (WebHDFS unreachable after the retries, a NameNode
    busy, in standby or in safe mode, an upload cut off)."""


class PostgresError(EtlError):
    """A rollup's PostgreSQL target refused a statement, or holds what this job did not write."""


class PostgresConflict(PostgresError):
    """A rollup's offset in PostgreSQL moved under this run (another writer): its transaction
    rolled back, and the batch stays open for the next run."""


class PostgresUnavailable(PostgresError, Retryable):
    """A rollup's PostgreSQL target could not be reached, or the connection dropped mid-way."""


class DimensionError(EtlError):
    """A dimension source (reference data for enrichment) cannot be read or used."""


class DimensionChanged(DimensionError):
    """A resumed batch's pinned dimension snapshot changed or vanished since the batch was planned."""


class TaskFailed(EtlError):
    """A Spark task of a batch failed; the message names the task's own error where Spark
    reported one. The batch stays open."""


class TaskFailedRetryable(TaskFailed, Retryable):
    """A Spark task failed with one of the Retryable errors (a broker that stopped answering)."""


class TransformError(EtlError):
    """The custom transform raised, or returned rows that break its contract."""


class InjectedFault(EtlError):
    """Raised by the test-only fault points (etl.faults) when asked to raise."""


# Failures that say nothing about the data and may succeed when tried again. Only
# idempotent operations are ever retried (see etl.retry).
RETRYABLE_OS_ERRORS = (ConnectionError, TimeoutError)
