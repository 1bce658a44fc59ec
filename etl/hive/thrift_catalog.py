"""The metastore through a Thrift client in the driver ([hive] metastore_client = thrift, the
default for a thrift:// metastore): etl.hive.catalog's seam without Spark's Hive client.

The calls are the ones Hive's own clients make for the same work (get_database, get_table_req,
get_partition, get_partitions, add_partitions_req with ifNotExists), from the Hive 3 IDL that
pymetastore generates; Hive 2.3, 3.1 and 4.0 metastores all serve them (a Thrift server skips
the fields it does not know). Not get_table, which Spark's built-in 2.3 client calls: Hive 4 dropped it.
A partition is added as Hive's own client adds one: the table's storage descriptor (columns,
formats, SerDe), with the partition's location.

One connection per command, opened on the first call. A call that loses its connection is not
retried here: the registrar's callers treat HiveUnavailable as a run that stopped before its
commit, which the next run completes (every call here is a read or an ADD IF NOT EXISTS).
"""
from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

from etl.errors import HiveError, HiveUnavailable
from etl.hive.catalog import CASCADED_PROPERTY, OWNER_PROPERTY, ROLLUP_PROPERTY, TableFacts, partition_name
from etl.model.schema import Column, normalise_hive_type


class ThriftCatalog:
    def __init__(self, uri: str, timeout_seconds: float):
        """`uri`: thrift://host:port ([hive] metastore, checked where the config is parsed);
        `timeout_seconds`: one call's bound ([hive]'s metastore_timeout_seconds)."""
        where = urlsplit(uri)
        self.uri, self._host, self._port = uri, where.hostname, where.port
        self.timeout_seconds = timeout_seconds
        self._client: Any = None  # ThriftHiveMetastore.Client, once connected
        self._transport: Any = None

    def _connected(self):
        if self._client is None:
            from pymetastore.hive_metastore import ThriftHiveMetastore
            from thrift.protocol import TBinaryProtocol
            from thrift.transport import TSocket, TTransport
            socket = TSocket.TSocket(self._host, self._port)
            socket.setTimeout(int(self.timeout_seconds * 1000))
            transport = TTransport.TBufferedTransport(socket)
            try:
                transport.open()
            except TTransport.TTransportException as exc:
                raise HiveUnavailable(f"cannot connect to the metastore at {self.uri}: {exc}") from exc
            self._transport = transport
            self._client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        return self._client

    def _call(self, name: str, *args):
        """One Thrift call; a lost connection is HiveUnavailable (and the next call reconnects),
        the metastore's refusal a HiveError. NoSuchObjectException is the caller's to read."""
        from pymetastore.hive_metastore.ttypes import NoSuchObjectException
        from thrift.Thrift import TException
        from thrift.transport.TTransport import TTransportException
        client = self._connected()
        try:
            return getattr(client, name)(*args)
        except NoSuchObjectException:
            raise
        except (TTransportException, OSError, EOFError) as exc:
            self.close()
            raise HiveUnavailable(f"the metastore at {self.uri} did not answer {name}: {exc}") from exc
        except TException as exc:
            raise HiveError(f"the metastore at {self.uri} refused {name}: {_message(exc)}") from exc

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._client = self._transport = None

    def _table(self, database: str, table: str):
        from pymetastore.hive_metastore.ttypes import GetTableRequest, NoSuchObjectException
        try:
            return self._call("get_table_req", GetTableRequest(dbName=database, tblName=table)).table
        except NoSuchObjectException:
            return None

    def database_exists(self, database: str) -> bool:
        from pymetastore.hive_metastore.ttypes import NoSuchObjectException
        try:
            self._call("get_database", database)
        except NoSuchObjectException:
            return False
        return True

    def table_facts(self, database: str, table: str) -> TableFacts | None:
        """The data columns as the metastore's storage descriptor lists them, which Spark's
        ALTER TABLE ... ADD COLUMNS keeps in step with its own copy of the schema."""
        found = self._table(database, table)
        if found is None:
            return None
        name = f"{database}.{table}"
        columns = tuple(Column(c.name.lower(), normalise_hive_type(c.type, name)) for c in found.sd.cols)
        properties = found.parameters or {}
        return TableFacts(columns, properties.get(OWNER_PROPERTY), properties.get(CASCADED_PROPERTY),
                          found.sd.inputFormat, properties.get(ROLLUP_PROPERTY))

    def locations(self, database: str, table: str, partitions: list[dict[str, str]]) -> list[str | None]:
        from pymetastore.hive_metastore.ttypes import NoSuchObjectException
        keys = [k.name for k in self._existing(database, table).partitionKeys]
        found: list[str | None] = []
        for values in partitions:
            try:
                found.append(self._call("get_partition", database, table, [values[k] for k in keys]).sd.location)
            except NoSuchObjectException:
                found.append(None)
        return found

    def all_locations(self, database: str, table: str) -> dict[str, str]:
        found = self._table(database, table)
        if found is None:
            return {}
        keys = [k.name for k in found.partitionKeys]
        return {partition_name(dict(zip(keys, p.values))): p.sd.location
                for p in self._call("get_partitions", database, table, -1)}

    def add_partitions(self, database: str, table: str, partitions: list[dict[str, str]],
                       locations: list[str]) -> None:
        from pymetastore.hive_metastore.ttypes import AddPartitionsRequest, Partition
        found = self._existing(database, table)  # read now: an ALTER TABLE ... ADD COLUMNS may have just changed it
        keys = [k.name for k in found.partitionKeys]
        parts = []
        for values, location in zip(partitions, locations):
            storage = copy.deepcopy(found.sd)
            storage.location = location
            parts.append(Partition(values=[values[k] for k in keys], dbName=database, tableName=table, sd=storage,
                                   parameters={}))
        self._call("add_partitions_req", AddPartitionsRequest(dbName=database, tblName=table, parts=parts,
                                                              ifNotExists=True, needResult=False))

    def _existing(self, database: str, table: str):
        """The table, which must exist (the registrar ensured it)."""
        found = self._table(database, table)
        if found is None:
            raise HiveError(f"table {database}.{table} does not exist")
        return found


def _message(exc: Exception) -> str:
    """A metastore exception's own message (MetaException, InvalidObjectException: .message)."""
    return getattr(exc, "message", None) or str(exc) or type(exc).__name__
