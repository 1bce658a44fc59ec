"""A rollup's `target`: a PostgreSQL database that keeps the rollup too, by the seed's mechanism
(etl.postgres): the batch's merged aggregates and the job's offsets in one transaction.

    target        = postgresql://etl@db.example.com:5432/dashboards?sslmode=verify-full
    password_file = /etc/etl/rollups.password

The URL is libpq's (its query takes libpq's parameters). A password in it is refused: the INI
holds no secret, and `password_file` names the file that does, as the Kafka secrets' `_file`
keys do.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class PostgresTarget:
    url: str  # as configured, with no password in it
    password: str | None = field(default=None, repr=False)  # read from password_file
    password_file: Path | None = None  # named in messages, never the password itself

    def describe(self) -> str:
        """The server and database, for messages."""
        parts = urlsplit(self.url)
        return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"


def parse_target(raw: str) -> str:
    """The `target` URL, checked; raises ValueError with the reason."""
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        raise ValueError(f"is no URL: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ValueError("a rollup's target is a PostgreSQL database: postgresql://user@host:port/database")
    if parts.password is not None:
        raise ValueError("holds a password: the INI holds no secret; put it alone in a file that password_file "
                         "names")
    if not parts.hostname:
        raise ValueError("names no host: postgresql://user@host:port/database")
    if parts.path.strip("/") == "" or "/" in parts.path.strip("/"):
        raise ValueError("names no database: postgresql://user@host:port/database")
    return raw
