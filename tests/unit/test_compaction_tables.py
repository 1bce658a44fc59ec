"""Compaction per table, without Spark: the real compaction room (etl.compaction) on the memory
store, real Parquet files in a local folder and a metastore in a dict (tests/harness/fake_metastore.py).
A one-table job's compaction stays what it was; a routed job's tables are each compacted into their
own folder, with their own relocations, and the rejected table once; a compaction of a routed table
interrupted at each of its six fault points is carried on by the next pass to the same end.
The same through `etl` and the real metastore: tests/integration/test_compaction*.py."""
from __future__ import annotations

import datetime as dt
import json
import posixpath
from pathlib import Path

import pytest

import pyarrow.orc as orc

from etl.compaction.run import compact
from etl.compaction.tables import CompactedTable, TableKind
from etl.config import load_config
from etl.config.model import HiveFormat
from etl.context.command import CommandContext
from etl.errors import EXIT_OK, HiveError, InjectedFault
from etl.hive.registrar import HiveRegistrar
from etl.model.batch import OffsetRange
from etl.model.naming import final_name
from etl.ops.acting import Act
from etl.ops.compact import CompactOptions, compact_in
from etl.sink.checksums import CHECKSUMS_KEY
from etl.sink.fs import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import minimal_ini, routed_ini
from tests.harness.fake_metastore import FakeMetastore, MetastoreContext
from tests.harness.memory_store import MemoryStore
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.store_contract import batch, committed
from tests.unit.test_merge_far_timestamps import batch_table, write_batch_file

P = "dt=2026-11-20/hour=10"
NOW = dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc)
SETTINGS = "[compaction]\nmin_files = 2\nonly_finished = false\nkeep_superseded_minutes = 0\n"
ROUTES = f"""[route orders]
topics = orders
table = orders
schema = {EVENTS_SCHEMA}
[route clicks]
topics = clicks
table = clicks
schema = {EVENTS_SCHEMA}
"""
ORDERS, CLICKS, REJECTED = CompactedTable(TableKind.MAIN, "orders"), CompactedTable(TableKind.MAIN, "clicks"), \
    CompactedTable(TableKind.REJECTED)
POINTS = ["compact:PLANNED", "compact:merged:0", "compact:WRITTEN", "compact:metastore-switched", "compact:SWITCHED",
          "compact:DELETED"]


class Job:
    """A job whose tables each hold three small files of partition P, registered where they are."""

    def __init__(self, root: Path, routed: bool, file_format: HiveFormat = HiveFormat.PARQUET):
        hive = f"format = {file_format.value}"
        ini = routed_ini(ROUTES + SETTINGS, hive=f"rejected_table = rejects\n{hive}") if routed else \
            minimal_ini(EVENTS_SCHEMA, kafka="topics = events", sections=SETTINGS, hive=hive)
        (root / "job.ini").write_text(ini.replace("url = file:///tmp/w", f"url = file://{root}/w"))
        self.config = load_config(root / "job.ini")
        self.store, self.metastore, self.fs = MemoryStore(), FakeMetastore(), LocalFileSystem()
        self.warehouse = Warehouse.of(self.config)
        self.tables = {"orders": "orders", "clicks": "clicks"} if routed else {"t": "events"}
        views = [(self.warehouse.for_table(name) if routed else self.warehouse, name, topic)
                 for name, topic in self.tables.items()]
        for view, name, topic in views:
            self._files(view.main_dir(P), name, FileLayout(file_format=file_format), topic)
        self._files(self.warehouse.rejected_dir(P), self.config.hive.rejected_table, FileLayout(),
                    *self.tables.values())
        self.store.session.acquire_lock()
        committed(self.store, batch(ranges=[OffsetRange(t, 0, 0, 30, None) for t in self.tables.values()]))

    def _files(self, folder: str, table: str, layout: FileLayout, *topics: str) -> None:
        Path(folder).mkdir(parents=True)
        for topic in topics:
            for start in (0, 10, 20):
                write_batch_file(Path(folder) / final_name(topic, 0, start, start + 10, file_format=layout.file_format),
                                 batch_table(start, [dt.datetime(2026, 11, 20, 10)] * 10), layout=layout)
        self.metastore.locations[(table, P)] = self.warehouse.hive_uri(folder)

    def compact(self, tables=None, only=None):
        with MetastoreContext(self.config, clock=lambda: NOW, store=self.store, fs=self.fs,
                              metastore=self.metastore) as context:
            return compact(context, only, tables=tables) if tables is not None else compact(context, only)

    def files(self, table: str | None, kind: TableKind = TableKind.MAIN) -> dict[str, list[str]]:
        """Every folder of the table that holds a file, and its file names."""
        view = self.warehouse.view(table).with_relocations(self.store.compactions.relocations().for_table(table)
                                                           if table else self.store.compactions.relocations())
        root = Path(view.root(kind))
        return {str(d.relative_to(root)): sorted(f.name for f in d.iterdir() if f.is_file())
                for d in sorted(root.rglob("*")) if d.is_dir() and any(f.is_file() for f in d.iterdir())}


def test_a_one_table_jobs_compaction_stores_and_reports_no_table_name(tmp_path):
    job = Job(tmp_path, routed=False)
    report = job.compact()
    assert [(p.table, p.table_name) for p in report.planned] == [(TableKind.MAIN, None), (TableKind.REJECTED, None)]
    assert "table_name" not in json.dumps(report.to_json())
    assert report.render().splitlines()[1].startswith("  main dt=2026-11-20/hour=10: 3 files")
    relocations = job.store.compactions.relocations()
    assert relocations.main == {P: report.planned[0].target} and relocations.rejected == {P: report.planned[1].target}
    assert relocations.tables == {} and job.store.state.table_relocations == {}
    assert job.files(None) == {report.planned[0].target: [final_name("events", 0, 0, 30)]}


@pytest.mark.parametrize("routed", [False, True])
def test_an_orc_jobs_tables_are_merged_each_in_its_own_format(tmp_path, routed):
    """The tables' files are ORC, the rejected table's Parquet: each is found, merged, proven by
    its checksums and published in its own format (the rejected table's were once looked for as
    ORC, found none, and left alone)."""
    job = Job(tmp_path, routed=routed, file_format=HiveFormat.ORC)
    report = job.compact(tables=(ORDERS, CLICKS, REJECTED)) if routed else job.compact()
    assert [p.label for p in report.planned] == (["orders", "clicks", "rejected"] if routed else ["main", "rejected"])
    *mains, rejected = report.planned
    for plan, table in zip(mains, job.tables):
        name = final_name(job.tables[table], 0, 0, 30, file_format=HiveFormat.ORC)
        assert job.files(table if routed else None) == {plan.target: [name]}
        view = job.warehouse.view(table if routed else None)
        merged = orc.ORCFile(posixpath.join(view.root(TableKind.MAIN), plan.target, name))
        assert merged.nrows == 30 and CHECKSUMS_KEY in merged.metadata
    assert job.files(None, TableKind.REJECTED) == {rejected.target: sorted(final_name(t, 0, 0, 30)
                                                                          for t in job.tables.values())}


def test_each_routed_table_is_compacted_into_its_own_folder_and_the_rejected_table_once(tmp_path):
    job = Job(tmp_path, routed=True)
    report = job.compact(tables=(ORDERS, CLICKS, REJECTED))
    assert [(p.label, p.partition) for p in report.planned] == [("orders", P), ("clicks", P), ("rejected", P)]
    orders, clicks, rejected = report.planned
    assert orders.target != clicks.target != rejected.target  # ids differ, so do the folders
    relocations = job.store.compactions.relocations()
    assert relocations.main == {} and relocations.rejected == {P: rejected.target}
    assert relocations.tables == {"orders": {P: orders.target}, "clicks": {P: clicks.target}}
    assert job.files("orders") == {orders.target: [final_name("orders", 0, 0, 30)]}
    assert job.files("clicks") == {clicks.target: [final_name("clicks", 0, 0, 30)]}
    assert job.files(None, TableKind.REJECTED) == {rejected.target: [final_name("clicks", 0, 0, 30),
                                                                      final_name("orders", 0, 0, 30)]}
    db = job.warehouse.database_root
    assert job.metastore.locations == {
        ("orders", P): job.warehouse.hive_uri(posixpath.join(db, "orders", orders.target)),
        ("clicks", P): job.warehouse.hive_uri(posixpath.join(db, "clicks", clicks.target)),
        ("rejects", P): job.warehouse.hive_uri(posixpath.join(db, "rejects", rejected.target))}
    assert json.loads(json.dumps(report.to_json()))["compacted"][0]["table_name"] == "orders"
    assert "  orders dt=2026-11-20/hour=10: 3 files" in report.render()


def test_only_the_tables_asked_for_are_compacted(tmp_path):
    job = Job(tmp_path, routed=True)
    report = job.compact(tables=(CLICKS,), only=[P, "dt=2026-11-20/hour=11"])
    assert [p.label for p in report.planned] == ["clicks"]
    assert [c.skipped for c in report.looked_at][-1] == "not a partition of the tables looked at"
    assert job.store.compactions.relocations().tables.keys() == {"clicks"} \
        and job.store.compactions.relocations().rejected == {}


@pytest.mark.parametrize("point", POINTS)
def test_a_routed_compaction_interrupted_anywhere_is_carried_on_to_the_same_end(tmp_path, monkeypatch, point):
    (tmp_path / "plain").mkdir()
    (tmp_path / "cut").mkdir()
    plain, cut = Job(tmp_path / "plain", routed=True), Job(tmp_path / "cut", routed=True)
    plain.compact(tables=(ORDERS,))
    monkeypatch.setenv("ETL_FAULT_POINT", point)
    monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
    with pytest.raises(InjectedFault):
        cut.compact(tables=(ORDERS,))
    [(plan, _)] = cut.store.compactions.open_compactions()
    inputs = {f.name for f in plan.inputs}
    if cut.metastore.moved == []:  # Hive still reads the old folder: every input must be there
        assert set(cut.files("orders").get(P, [])) == inputs
    monkeypatch.delenv("ETL_FAULT_POINT")
    again = cut.compact(tables=(ORDERS,))
    assert again.planned == [] and cut.store.compactions.open_compactions() == []
    assert cut.files("orders") == plain.files("orders") == {plan.target: [final_name("orders", 0, 0, 30)]}
    assert cut.store.compactions.relocations() == plain.store.compactions.relocations()
    relative = {k: v.replace(str(tmp_path / "cut"), "") for k, v in cut.metastore.locations.items()}
    assert relative == {k: v.replace(str(tmp_path / "plain"), "") for k, v in plain.metastore.locations.items()}
    assert len(cut.metastore.moved) == 1 or point == "compact:metastore-switched"  # set again, idempotent


def test_a_routed_partition_moved_by_hand_is_refused_naming_its_table(tmp_path, monkeypatch):
    job = Job(tmp_path, routed=True)
    monkeypatch.setenv("ETL_FAULT_POINT", "compact:WRITTEN")
    monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
    with pytest.raises(InjectedFault):
        job.compact(tables=(ORDERS,))
    monkeypatch.delenv("ETL_FAULT_POINT")
    job.metastore.locations[("orders", P)] = "file:///elsewhere"
    with pytest.raises(HiveError, match="of the orders table is registered at file:///elsewhere"):
        job.compact(tables=(ORDERS,))
    assert job.store.compactions.relocations().tables == {}


def test_a_table_met_by_compaction_first_is_still_evolved_when_a_batch_asks_for_it(tmp_path, monkeypatch):
    """R6: compaction's clients are cached apart, so `table_registrar` after `existing_table` ensures."""
    job = Job(tmp_path, routed=True)
    calls: list[str] = []
    monkeypatch.setattr(HiveRegistrar, "check_claimed", lambda self: calls.append(f"claimed {self.hive.table}"))
    monkeypatch.setattr(HiveRegistrar, "ensure_table",
                        lambda self, ddl=None: calls.append(f"ensured {self.hive.table}"))

    class Started(CommandContext):  # the real existing_table and table_registrar, no Spark
        def registrar(self):
            return HiveRegistrar(None, None, self.config.hive, self.warehouse)

    with Started(job.config, store=job.store, fs=job.fs) as context:
        context.existing_table("orders")
        context.existing_table("orders")
        context.table_registrar(job.config.for_table(job.config.routes.routes[0], "orders"),
                                job.warehouse.for_table("orders"))
    assert calls == ["claimed orders", "ensured orders"]


def test_etl_compact_of_a_routed_job_compacts_the_tables_named_whatever_their_case(tmp_path):
    job = Job(tmp_path, routed=True)
    job.store.session.release_lock()
    said: list[str] = []
    with MetastoreContext(job.config, clock=lambda: NOW, store=job.store, fs=job.fs,
                          metastore=job.metastore) as context:
        assert compact_in(context, CompactOptions(tables=("CLICKS",), act=Act.EXECUTE, as_json=True),
                          out=said.append) == EXIT_OK
        assert context.existing == ["clicks"]
    assert [p["table_name"] for p in json.loads(said[0])["compacted"]] == ["clicks"]
    assert job.store.compactions.relocations().tables.keys() == {"clicks"} and job.store.session.lock_holder() is None
