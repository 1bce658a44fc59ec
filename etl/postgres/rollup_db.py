"""One PostgreSQL target's connection, and the three transactions the job runs in it: ensure a
rollup's tables, apply a batch (its merged aggregates and its offsets, the seed's transaction),
and replace a rollup's rows and offsets whole (`etl rollup rebuild`, `etl reset-offsets
--rebuild-rollups`).

Each transaction first locks the rollup's definition row (SELECT … FOR UPDATE), so that two
writers of one rollup (a run and a zombie that lost ZooKeeper's lock) take turns, and each
checks what it moves: an offset moves only from the value the caller read (the guard's row
count must be 1), or the whole transaction rolls back.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import psycopg

from etl.config.rollup_target import PostgresTarget
from etl.errors import PostgresConflict, PostgresError, PostgresUnavailable, RollupRefused
from etl.model.rollup_table import RollupSpec
from etl.postgres.positions import OffsetMove, Partition, Position
from etl.postgres.statements import DEFINITIONS_TABLE, OFFSETS_TABLE, SHARED_DDL, create_table, quoted, upsert


class RollupDatabase:
    """Built once per command, by its context (etl.context.job), for the rollups of one target."""

    def __init__(self, target: PostgresTarget, owner: str,
                 connect: Callable[..., psycopg.Connection] = psycopg.connect):
        self.target, self.owner = target, owner  # owner: the job's name, kept beside each definition
        self._connect = connect
        self._connection: psycopg.Connection | None = None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def ensure(self, spec: RollupSpec) -> None:
        """The shared tables and the rollup's, created with its definition in one transaction; an
        existing rollup's definition checked."""
        with self._transaction() as cursor:
            for statement in SHARED_DDL:
                cursor.execute(statement)
            if self._definition(cursor, spec) is None:
                cursor.execute(create_table(spec))
                cursor.execute(f"INSERT INTO {DEFINITIONS_TABLE} VALUES (%s, %s, %s)",
                               (spec.view, self.owner, spec.definition))
            else:
                self._check_definition(cursor, spec)

    def positions(self, spec: RollupSpec) -> dict[Partition, Position]:
        with self._transaction() as cursor:
            cursor.execute(f"SELECT topic, kafka_partition, next_offset, batch_id FROM {OFFSETS_TABLE} "
                           f"WHERE rollup_table = %s", (spec.view,))
            return {(topic, partition): Position(offset, batch) for topic, partition, offset, batch in cursor}

    def rows(self, spec: RollupSpec) -> list[tuple]:
        """The rollup's rows, in `spec.columns`' order (etl verify --deep)."""
        with self._transaction() as cursor:
            cursor.execute(f"SELECT {', '.join(quoted(c.name) for c in spec.columns)} FROM {quoted(spec.view)}")
            return cursor.fetchall()

    def apply(self, spec: RollupSpec, batch_id: int, moves: Sequence[OffsetMove], rows: list[tuple]) -> None:
        """The seed's transaction: `rows` (merged groups, in `spec.columns`' order) added in, and
        each of `moves` from its start to its end; all or nothing."""
        with self._transaction() as cursor:
            self._check_definition(cursor, spec)
            if rows:
                cursor.executemany(upsert(spec), rows)
            for move in moves:
                if move.start is None:
                    cursor.execute(f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                   (spec.view, move.topic, move.partition, move.end, batch_id))
                else:
                    cursor.execute(f"UPDATE {OFFSETS_TABLE} SET next_offset = %s, batch_id = %s WHERE rollup_table "
                                   f"= %s AND topic = %s AND kafka_partition = %s AND next_offset = %s",
                                   (move.end, batch_id, spec.view, move.topic, move.partition, move.start))
                if cursor.rowcount != 1:
                    raise PostgresConflict(f"{spec.rollup.describe()}: {move.topic}:{move.partition}'s offset in "
                                           f"{self.target.describe()} is no longer {move.start}: another writer "
                                           f"moved it; nothing of batch {batch_id} was added there")

    def replace(self, spec: RollupSpec, positions: dict[Partition, Position], rows: list[tuple]) -> None:
        """The rollup's rows and offsets, whole, in one transaction (its definition recorded anew)."""
        with self._transaction() as cursor:
            for statement in SHARED_DDL:
                cursor.execute(statement)
            self._definition(cursor, spec)  # locks its row, if any: a writer of the rollup waits for this
            cursor.execute(f"DROP TABLE IF EXISTS {quoted(spec.view)}")
            cursor.execute(create_table(spec))
            cursor.execute(f"DELETE FROM {DEFINITIONS_TABLE} WHERE rollup_table = %s", (spec.view,))
            cursor.execute(f"INSERT INTO {DEFINITIONS_TABLE} VALUES (%s, %s, %s)",
                           (spec.view, self.owner, spec.definition))
            if rows:
                cursor.executemany(upsert(spec), rows)
            cursor.execute(f"DELETE FROM {OFFSETS_TABLE} WHERE rollup_table = %s", (spec.view,))
            cursor.executemany(f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s, %s)",
                               [(spec.view, topic, partition, p.next_offset, p.batch_id)
                                for (topic, partition), p in sorted(positions.items())])

    def _check_definition(self, cursor, spec: RollupSpec) -> None:
        found = self._definition(cursor, spec)
        if found is None:
            raise RollupRefused(f"{spec.rollup.describe()}: {self.target.describe()} holds no table {spec.view} made "
                                f"by this job; run `etl rollup rebuild --rollup {spec.rollup.name} --execute`")
        owner, definition = found
        if owner != self.owner or definition != spec.definition:
            what = f"job {owner}'s" if owner != self.owner else "computed by another definition"
            raise RollupRefused(f"{spec.rollup.describe()}: {spec.view} in {self.target.describe()} is {what}; "
                                f"its rows would not add up with this section's: run `etl rollup rebuild --rollup "
                                f"{spec.rollup.name} --execute`, which makes it again from the table's rows")

    def _definition(self, cursor, spec: RollupSpec) -> tuple[str, str] | None:
        cursor.execute(f"SELECT job, definition FROM {DEFINITIONS_TABLE} WHERE rollup_table = %s FOR UPDATE",
                       (spec.view,))
        return cursor.fetchone()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor]:
        """A cursor in one transaction: committed on leaving, rolled back on an exception; a lost
        connection is PostgresUnavailable (retryable: the guard makes a second try safe)."""
        connection = self.connection()
        try:
            with connection.transaction(), connection.cursor() as cursor:
                yield cursor
        except psycopg.OperationalError as exc:
            self.close()
            raise PostgresUnavailable(f"{self.target.describe()}: {exc}") from exc
        except psycopg.Error as exc:  # refused: a type, a permission, a table changed by hand
            raise PostgresError(f"{self.target.describe()} refused a statement: {exc}; if a rollup's table there was "
                                f"changed or dropped by hand, `etl rollup rebuild --rollup NAME --execute` makes it "
                                f"again") from exc

    def connection(self) -> psycopg.Connection:
        if self._connection is None or self._connection.closed:
            try:
                self._connection = self._connect(self.target.url, password=self.target.password, autocommit=True,
                                                 connect_timeout=10, options="-c TimeZone=UTC")
            except psycopg.OperationalError as exc:
                raise PostgresUnavailable(f"cannot reach {self.target.describe()}: {exc}") from exc
        return self._connection
