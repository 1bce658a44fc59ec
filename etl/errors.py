"""Every error the ETL raises on purpose derives from EtlError.

Each error carries an exit code for the CLI and says what is wrong and what the operator
can do about it. Which failures are worth retrying is plain data (RETRYABLE_*), so that
retry policies never guess.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_BATCH_FAILED = 1
EXIT_USAGE = 2


class EtlError(Exception):
    """Root of the ETL's own errors. `exit_code` is what the CLI exits with."""

    exit_code = EXIT_BATCH_FAILED


class ConfigError(EtlError):
    """The config file is missing, malformed, or has a bad key. Nothing was touched."""

    exit_code = EXIT_USAGE


class SchemaError(ConfigError):
    """A warehouse_schema DDL file cannot be used."""


class ZooKeeperAccessDenied(ConfigError):
    """ZooKeeper refused the [zookeeper] credentials, or the job's znodes are not protected the
    way [zookeeper] auth says. Nothing was touched."""


class TopicNotFound(EtlError):
    """A configured topic does not exist on the brokers."""


class KafkaUnavailable(EtlError):
    """The brokers did not answer within the configured retries."""


class KafkaReadError(EtlError):
    """A task could not read its planned offset range."""


class OffsetOutOfRange(EtlError):
    """A committed or planned offset is outside what Kafka still holds."""


class LockLost(EtlError):
    """This run no longer owns the job lock (its ZooKeeper session expired or was taken over)."""


class StateConflict(EtlError):
    """ZooKeeper state is not what this run expected; a commit was refused."""


class MissingBatchFiles(EtlError):
    """A batch's planned files are not all present after its tasks ran."""


class RejectedRatioExceeded(EtlError):
    """Too many records of a batch could not be decoded."""


class SchemaRegistryUnavailable(EtlError):
    """The Schema Registry did not answer (or answered 5xx) within the configured retries. The
    batch fails and stays open; records are never rejected for it."""


class SchemaRegistryRefused(EtlError):
    """The Schema Registry refused a request for a reason a retry will not change (credentials,
    permissions, a malformed request)."""


class HiveError(EtlError):
    """A Hive metastore operation failed."""


class WarehouseError(EtlError):
    """A warehouse filesystem operation failed or returned an unexpected result."""


class DimensionError(EtlError):
    """A dimension source (reference data for enrichment) cannot be read or used."""


class DimensionChanged(DimensionError):
    """A resumed batch's pinned dimension snapshot changed or vanished since the batch was planned."""


class TransformError(EtlError):
    """The custom transform raised, or returned rows that break its contract."""


class InjectedFault(EtlError):
    """Raised by the test-only fault points (etl.faults) when asked to raise."""


# Failures that say nothing about the data and may succeed when tried again. Only
# idempotent operations are ever retried (see etl.retry).
RETRYABLE_OS_ERRORS = (ConnectionError, TimeoutError)
