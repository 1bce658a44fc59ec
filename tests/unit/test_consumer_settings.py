"""The settings of the ETL's own Kafka consumers: librdkafka's defaults, except where a
bounded read of a range needs otherwise, and never over what the user set in [kafka]."""
import logging

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from etl.config import load_config
from etl.source.kafka import consumer_settings
from tests.harness.config_file import minimal_ini


def _config(tmp_path, rootpath, kafka=""):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(rootpath / "warehouse_schema" / "events.sql", kafka=f"topics = a\n{kafka}"))
    return load_config(path)


def test_a_consumer_postpones_its_next_fetch_by_milliseconds_not_a_second(tmp_path, request):
    # librdkafka stops fetching while 100,000 messages wait in its queue and looks again only
    # after fetch.queue.backoff.ms, 1 s by default. A task drains that queue in a fraction of
    # that, then waited out the rest: 1 s of every 250,000-record range (see docs/performance.md).
    settings = consumer_settings(_config(tmp_path, request.config.rootpath).kafka, "etl-j1")
    assert int(settings["fetch.queue.backoff.ms"]) <= 50
    Consumer(settings).close()  # librdkafka accepts every setting (it connects nowhere yet)


def test_the_users_kafka_settings_win_over_the_etls_tuning(tmp_path, request):
    config = _config(tmp_path, request.config.rootpath, kafka="fetch.queue.backoff.ms = 1000")
    assert consumer_settings(config.kafka, "etl-j1")["fetch.queue.backoff.ms"] == "1000"


def test_the_job_owns_offsets_whatever_the_tuning(tmp_path, request):
    settings = consumer_settings(_config(tmp_path, request.config.rootpath).kafka, "etl-j1")
    assert settings["group.id"] == "etl-j1"
    assert settings["enable.auto.commit"] is False
    assert settings["auto.offset.reset"] == "error"


def test_the_drivers_admin_client_gets_no_consumer_only_setting(tmp_path, request):
    # The driver's AdminClient is a producer-type handle: librdkafka warns (CONFWARN, on stderr,
    # at every run) about each consumer-only key it is given, such as a fetch size set in [kafka].
    kafka = "max.partition.fetch.bytes = 2097152\nfetch.queue.backoff.ms = 1000\nsocket.timeout.ms = 20000"
    config = _config(tmp_path, request.config.rootpath, kafka=kafka).kafka
    assert set(config.admin_client) == {"bootstrap.servers", "socket.timeout.ms"}
    assert config.client["max.partition.fetch.bytes"] == "2097152"  # the consumers still get it
    assert _librdkafka_warnings(AdminClient, config.admin_client) == []
    assert len(_librdkafka_warnings(AdminClient, config.client)) == 2  # what the probe hears without the split


def _librdkafka_warnings(client_type, settings) -> list[str]:
    """The configuration warnings (CONFWARN) librdkafka logs while it builds a client from
    `settings` (no broker needed). Only those: its background thread may already have logged
    a failed connection to the bootstrap address by the time the queue is served, more often
    on a loaded machine."""
    class Captured(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    logger, captured = logging.Logger("librdkafka-probe"), Captured()
    logger.addHandler(captured)
    client = client_type({**settings, "logger": logger})
    client.poll(0)  # the logs a client queued while it was built are served here
    return [line for line in captured.lines if line.startswith("CONFWARN ")]


def test_the_planner_asks_for_the_offsets_its_consumer_can_read_to(tmp_path, request):
    # read_committed (librdkafka's default): the last stable offset, past which the consumer is
    # never served while a transaction is open; read_uncommitted: the high watermark.
    from confluent_kafka import IsolationLevel

    from etl.source.kafka import consumer_isolation
    rootpath = request.config.rootpath
    assert consumer_isolation(_config(tmp_path, rootpath).kafka) == IsolationLevel.READ_COMMITTED
    uncommitted = _config(tmp_path, rootpath, kafka="isolation.level = read_uncommitted")
    assert consumer_isolation(uncommitted.kafka) == IsolationLevel.READ_UNCOMMITTED
