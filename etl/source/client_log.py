"""librdkafka's own log lines of the driver's Kafka clients, summarised instead of printed.

Left alone, librdkafka writes each line to stderr from its own threads: with the brokers down,
every client logs a FAIL line at each reconnect, hundreds a minute, before the command says in
one line that Kafka did not answer. Given a `logger` (confluent-kafka's config key), a client
queues its lines instead, and hands them over when it is polled; `ClientLog.summary` polls and
counts them, so that the error says once what librdkafka saw (`Connection refused (x212)`).
The clients' errors (their `error_cb`) are kept too: the last that says a broker refused the
job's credentials, or its certificate was refused (etl.source.access), is `refusal()`.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Protocol

from confluent_kafka import KafkaError

from etl.source.access import is_refusal

# What differs between two lines of the same complaint: librdkafka's handle name and the time
# in a state ("rdkafka#consumer-3", "after 0ms in state CONNECT").
_VARYING = re.compile(r"^\S+ \[[^]]*\] |\[thrd:[^]]*\]: |, \d+ identical error\(s\) suppressed"
                      r"|\(after \d+ms in state \w+\)")
SHOWN = 3  # distinct complaints in a summary


class _Polled(Protocol):
    def poll(self, timeout: float = ...) -> object: ...


class ClientLog(logging.Handler):
    """The lines of the clients that were given `settings()`, counted by what they say."""

    def __init__(self) -> None:
        super().__init__()
        self.logger = logging.Logger("librdkafka")  # no parent: nothing propagates to stderr
        self.logger.addHandler(self)
        self.heard: Counter[str] = Counter()
        self.clients: list[_Polled] = []
        self.refused: KafkaError | None = None

    def settings(self) -> dict:
        """What a client's config adds to be heard here."""
        return {"logger": self.logger, "error_cb": self._error}

    def _error(self, error: KafkaError) -> None:
        if is_refusal(error):
            self.refused = error

    def refusal(self) -> KafkaError | None:
        """The last refusal of the job's credentials or of a broker's certificate the clients
        reported (None: none)."""
        for client in self.clients:
            client.poll(0)  # serves the errors the client queued
        return self.refused

    def heard_from(self, *clients: _Polled) -> None:
        self.clients.extend(clients)

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.heard[" ".join(_VARYING.sub("", record.getMessage()).split())] += 1

    def summary(self) -> str:
        """What the clients logged at WARNING and above since the last summary, most frequent
        first, on one line ('' when nothing)."""
        for client in self.clients:
            client.poll(0)  # hands over the lines the client queued
        heard, self.heard = self.heard, Counter()
        shown = [f"{line} (x{count})" if count > 1 else line for line, count in heard.most_common(SHOWN)]
        more = f"; and {len(heard) - SHOWN} more" if len(heard) > SHOWN else ""
        return "; ".join(shown) + more
