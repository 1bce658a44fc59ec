"""`etl bind`: move a job, on purpose, to the table and folders its config names now
(etl.model.binding says why a job is bound to one table). Both sides are updated: the new table is
created or evolved and claimed (its etl.owner property), then the binding in ZooKeeper.

A job with [route] sections is bound to its routes (etl.model.route_binding): `etl bind` shows
how the config's routes differ from the bound ones, and with --execute binds the job to them. A
route removed whose topics have loaded records is refused unless --stop-loading says to stop
loading them; its tables stay bound as retired, so that `etl verify` still checks them. A loaded
topic whose routes now give it other tables is refused unless --move-loaded says to move it: its
records loaded so far stay in its old tables, which its old routes, restricted to it, keep bound
as retired (etl.model.route_binding.retired_by_move); the next ones go to its new tables from its
committed offsets on. Moving the tables to another database or folder is not built yet, and
refused. A one-table job takes routes when the records it loaded stay in its table and its
committed topics go on going there alone (etl.model.route_binding.from_one_table). No offset
moves."""
from __future__ import annotations

import getpass
from dataclasses import dataclass, replace

from etl.config.routes import Routes
from etl.context.command import CommandContext
from etl.errors import EXIT_OK, Refused, RefusedUntilDone
from etl.model.batch import utc_now_iso
from etl.model.binding import Target
from etl.model.route_binding import (
    BindingDiff, RouteBinding, binding_diff, from_one_table, into_retired, loaded_topics, moved_tables,
    retired_by_move,
)
from etl.model.events import Bind
from etl.ops.acting import Act, stops_at_preview
from etl.sink.marker_ledger import Ledger
from etl.sink.markers import MARKER_NAME
from etl.state.protocols import BatchPart


@dataclass(frozen=True)
class BindOptions:
    """`etl bind`'s command line: whether it acts, and what the operator says on purpose (the files
    were moved too; topics stop loading; loaded topics move to other tables)."""
    act: Act = Act.PREVIEW
    data_moved: bool = False
    stop_loading: bool = False
    move_loaded: bool = False


def bind(config, options: BindOptions, out=print) -> int:
    """`etl bind`: move the job to the table and folders its config names now."""
    with CommandContext(config) as context:
        return bind_in(context, options, out)


def bind_in(context: CommandContext, options: BindOptions, out=print) -> int:
    store = context.store
    refusal = context.shape.data_moved_refusal()
    if refusal and options.data_moved:
        raise Refused(refusal)
    if store.session.acquire_lock() is not None:
        raise RefusedUntilDone("a run holds the job lock; try again when it has finished")
    try:
        opened = store.batches.open_batch()
        if opened:
            raise RefusedUntilDone(f"batch {opened[0].batch_id} is open; finish it with the old config "
                                   f"({context.shape.finish_hint()}) first")
        current = context.shape.binding(context.warehouse)
        if isinstance(current, Target):
            return _bind_locked(context, current, options, out)
        return _bind_routes_locked(context, current, options, out)
    finally:
        store.session.release_lock()


def _bind_locked(context: CommandContext, current: Target, options: BindOptions, out) -> int:
    config, store = context.config, context.store
    bound = store.operator.binding()
    if bound == current:
        out(f"job {config.job.name} is already bound to {current.describe()}; nothing to do")
        return EXIT_OK
    out(f"job {config.job.name}: {bound.describe() if bound else 'not bound yet'} -> {current.describe()}")
    data_moved = options.data_moved
    out("the files already loaded " + ("were moved there by you: `etl verify` checks them at the new place" if
                                        data_moved else "stay where they are; `etl verify` checks the new table from "
                                        "the offsets committed now"))
    if stops_at_preview(options.act, out):
        return EXIT_OK
    context.registrar()  # the new table created (or evolved) and claimed before ZooKeeper points at it
    store.operator.rebind(current, reset_origins=not data_moved,
                 event=Bind(utc_now_iso(), getpass.getuser(), to=current.to_json(), data_moved=data_moved,
                            previous=bound.to_json() if bound else None))
    out("bound; recorded in ZooKeeper")
    return EXIT_OK


def _bind_routes_locked(context: CommandContext, current: RouteBinding, options: BindOptions, out) -> int:
    config, store = context.config, context.store
    bound = store.operator.binding()
    offsets = store.offsets.committed_offsets()
    committed, loaded = {topic for topic, _ in offsets}, loaded_topics(offsets)  # loaded: nothing to leave behind
    if isinstance(bound, Target):
        return _bind_one_table_to_routes(context, bound, current, loaded, options, out)
    if isinstance(bound, RouteBinding) and bound.file_format is not current.file_format:
        raise Refused(f"job {config.job.name}'s tables are stored as {bound.file_format.value}, and [hive] format = "
                      f"{current.file_format.value}: a job's tables, the ones its retired routes loaded too, are all "
                      f"of one format, which `etl bind` cannot change; nothing changed. Restore [hive] format, or "
                      f"load the new format with a new job")
    diff = binding_diff(bound, current, sorted(committed), loaded) if bound else BindingDiff()
    if bound is not None and not diff:
        out(f"job {config.job.name} is already bound to its {len(current.routes)} routes; nothing to do")
        return EXIT_OK
    out(f"job {config.job.name}: " + ("; ".join(diff.describe()) if diff else f"not bound yet -> {current.describe()}"))
    # Keyed by the whole route, not its name: a topic moved twice by one route keeps both its old tables.
    retired = dict.fromkeys((*(bound.retired if bound else ()), *diff.removed,
                             *(retired_by_move(bound, diff.moved) if bound else ())))
    binding = replace(current, retired=tuple(retired))
    refusals = _refusals(bound, current, diff, options, config.routes) + [
        f"{topic} would load into table {table}, which holds the records of topic {', '.join(sorted(owners))} "
        f"(a table `etl bind` retired stays its topics'); give {topic} a table of its own; nothing changed"
        for topic, table, owners in into_retired(binding, diff.moved, committed, config.routes)]
    if refusals:
        raise Refused(*refusals)
    if stops_at_preview(options.act, out):
        return EXIT_OK
    _ensure_fixed_tables(context)  # created or evolved and claimed before ZooKeeper points at them
    store.operator.rebind(binding, reset_origins=False,
                 event=Bind(utc_now_iso(), getpass.getuser(), to=binding.to_json(), data_moved=False,
                            previous=bound.to_json() if bound else None))
    out("bound; recorded in ZooKeeper" + (f"; no longer loaded: {', '.join(diff.stopped)}" if diff.stopped else "") +
        (f"; moved to other tables: {', '.join(diff.moved)}" if diff.moved else ""))
    return EXIT_OK


def _unroutable(topic: str, why: str, routes: Routes) -> str:
    """A loaded topic a route still chooses, and cannot route: the routes are mended, it is never
    stopped (--stop-loading would stop loading a topic the config still wants)."""
    mend = ("make one route's pattern (or topics) leave it out, or split it by a field (field and values in each "
            "route that chooses it)" if len(routes.of_topic(topic)) > 1 else "mend its route as said")
    return f"{topic}: {why}. A route still chooses it, so it is not stopped: {mend}; nothing changed"


def _refusals(bound: RouteBinding | None, current: RouteBinding, diff: BindingDiff, options: BindOptions,
              routes: Routes) -> list[str]:
    """What the routes' difference needs that bind was not told: each refusal, or none."""
    if diff.elsewhere:
        return ["moving the job's tables to another database or folder, or giving it another rejected table, is not "
                "built yet; nothing changed"]
    refusals = [_unroutable(topic, why, routes) for topic, why in diff.unroutable]  # no flag makes these
    if diff.moved and bound is not None and not options.move_loaded:
        moves = " and ".join(moved_tables(bound, current, topic) for topic in diff.moved)
        refusals.append(f"{moves} have loaded records that would go to other tables; pass --move-loaded to move them "
                        f"on purpose (their records loaded so far stay in the old tables, which `etl verify` goes on "
                        f"checking, and the next ones go to the new tables); nothing changed")
    if diff.stopped and not options.stop_loading:
        refusals.append(f"{', '.join(diff.stopped)} have loaded records and no route of the config would load them "
                        f"any more; pass --stop-loading to stop loading them on purpose (their files stay, and `etl "
                        f"verify` checks them)")
    return refusals


def _bind_one_table_to_routes(context: CommandContext, bound: Target, current: RouteBinding, committed: set[str],
                              options: BindOptions, out) -> int:
    """A one-table job takes routes when every record it loaded stays where it is (from_one_table),
    and no compaction is under way (its plan names no table). Its compacted partitions stay where
    they are: their relocations are re-filed as its table's in the binding's own transaction."""
    config, store = context.config, context.store
    out(f"job {config.job.name}: one table, {bound.describe()} -> {current.describe()}")
    problems = from_one_table(bound, current, committed)
    if store.compactions.open_compactions():
        problems.append("a compaction is under way: `etl compact` finishes it (its replaced files are deleted "
                        "keep_superseded_minutes after its switch); then bind")
    problems += _awaiting_markers(store.batches)
    if problems:
        raise Refused(*problems)
    out(f"the records of {', '.join(sorted(committed)) or 'no topic'} stay in {bound.table}, and go on going there")
    compacted = len(store.compactions.relocations().main)
    if compacted:
        out(f"its {compacted} compacted partitions stay where they are, as table {bound.table}'s")
    if stops_at_preview(options.act, out):
        return EXIT_OK
    _ensure_fixed_tables(context)
    store.operator.rebind(current, reset_origins=False,
                          event=Bind(utc_now_iso(), getpass.getuser(), to=current.to_json(),
                                     data_moved=False, previous=bound.to_json()),
                          relocations_of=bound.table)
    out("bound; recorded in ZooKeeper")
    return EXIT_OK


def _awaiting_markers(store: BatchPart) -> list[str]:
    """A one-table job's marker ledger names no table (etl.sink.marker_ledger): bound to routes, the
    partitions it still lists would be marked in no table's folder, so the binding waits for them."""
    newest = store.last_batch()
    awaiting = [a.describe() for a in Ledger.of(newest[0] if newest else None).unmarked]
    if not awaiting:
        return []
    which = f"1 partition awaits its {MARKER_NAME} marker" if len(awaiting) == 1 else \
        f"{len(awaiting)} partitions await their {MARKER_NAME} markers"
    return [f"{which} ({', '.join(awaiting[:5])}{', ...' if len(awaiting) > 5 else ''}), which a one-table job "
            f"lists without its table: let `etl run` write them (`etl status` lists those waiting), then bind"]


def _ensure_fixed_tables(context: CommandContext) -> None:
    """The database, the rejected table and each fixed table of the routes (a templated route's
    tables, and a registry route's, are made by the batch that first loads their topic)."""
    config, warehouse = context.config, context.warehouse
    context.registrar()
    for route in config.routes.routes:
        if not route.templated and not route.from_registry:  # a registry route's DDL is derived as it loads
            context.table_registrar(config.for_table(route, route.table), warehouse.for_table(route.table))
