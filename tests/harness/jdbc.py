"""Analysts' queries through the Spark Thrift Server (HiveServer2), with Hive's JDBC driver (the
one beeline uses) in the test's JVM: how the tests read the tables as an analyst would."""
from __future__ import annotations

from collections import Counter
from typing import Callable


class JdbcReader:
    """Queries the Thrift Server through Hive's JDBC driver, in the test's JVM."""

    def __init__(self, jvm, url: str):
        jvm.java.lang.Class.forName("org.apache.hive.jdbc.HiveDriver")
        self.jvm, self.url = jvm, url

    def connect(self):
        return self.jvm.java.sql.DriverManager.getConnection(self.url, "", "")

    @staticmethod
    def query(connection, sql: str) -> list[tuple]:
        statement = connection.createStatement()
        try:
            result = statement.executeQuery(sql)
            width = result.getMetaData().getColumnCount()
            rows = []
            while result.next():
                rows.append(tuple(result.getString(i + 1) for i in range(width)))
            return rows
        finally:
            statement.close()


def offsets_sql(table: str, database: str = "etl_test") -> str:
    """Every row's coordinates, both tables in one statement: one row per table and partition,
    the offsets as a list (collect_list keeps duplicates)."""
    def part(label: str, name: str) -> str:
        return (f"SELECT '{label}', kafka_topic, kafka_partition, "
                f"concat_ws(',', collect_list(CAST(kafka_offset AS STRING))) "
                f"FROM `{database}`.`{name}` GROUP BY kafka_topic, kafka_partition")
    return f"{part('main', table)} UNION ALL {part('rejected', table + '_rejected')}"


def parse_offsets(rows) -> dict[str, Counter]:
    seen = {"main": Counter(), "rejected": Counter()}
    for label, topic, partition, offsets in rows:
        seen[label].update((topic, int(partition), int(o)) for o in offsets.split(",") if o)
    return seen


def offsets_reader(jvm, url: str) -> Callable[[str, str], Counter]:
    """read_table(database, table) -> Counter of (topic, partition, offset), each call a query of
    its own through the Thrift Server at `url`: the oracle's reader, as the analysts read."""
    reader = JdbcReader(jvm, url)

    def read_table(database: str, table: str) -> Counter:
        connection = reader.connect()
        try:
            rows = reader.query(connection,
                                f"SELECT kafka_topic, kafka_partition, kafka_offset FROM `{database}`.`{table}`")
        finally:
            connection.close()
        return Counter((topic, int(partition), int(offset)) for topic, partition, offset in rows)
    return read_table
