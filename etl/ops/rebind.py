"""`etl bind`: move a job, on purpose, to the table and folders its config names now
(etl.model.binding says why a job is bound to one table). Both sides are updated: the new table is
created or evolved and claimed (its etl.owner property), then the binding in ZooKeeper."""
from __future__ import annotations

import getpass

from etl.context.command import CommandContext
from etl.errors import EXIT_BATCH_FAILED, EXIT_OK, EXIT_USAGE
from etl.model.batch import utc_now_iso
from etl.model.binding import Target
from etl.model.events import Bind


def bind(config, yes: bool, data_moved: bool, out=print) -> int:
    """`etl bind`: move the job to the table and folders its config names now."""
    with CommandContext(config) as context:
        return bind_in(context, yes, data_moved, out)


def bind_in(context: CommandContext, yes: bool, data_moved: bool, out=print) -> int:
    current = Target.of(context.config, context.warehouse)
    store = context.store
    if store.acquire_lock() is not None:
        out("refused: a run holds the job lock; try again when it has finished")
        return EXIT_BATCH_FAILED
    try:
        return _bind_locked(context, current, yes, data_moved, out)
    finally:
        store.release_lock()


def _bind_locked(context: CommandContext, current: Target, yes: bool, data_moved: bool, out) -> int:
    config, store = context.config, context.store
    opened = store.open_batch()
    if opened:
        out(f"refused: batch {opened[0].batch_id} is open; finish it with the old config (`etl recover`) first")
        return EXIT_BATCH_FAILED
    bound = store.binding()
    if bound == current:
        out(f"job {config.job.name} is already bound to {current.describe()}; nothing to do")
        return EXIT_OK
    out(f"job {config.job.name}: {bound.describe() if bound else 'not bound yet'} -> {current.describe()}")
    out("the files already loaded " + ("were moved there by you: `etl verify` checks them at the new place" if
                                        data_moved else "stay where they are; `etl verify` checks the new table from "
                                        "the offsets committed now"))
    if not yes:
        out("nothing changed: pass --yes to apply")
        return EXIT_USAGE
    context.registrar()  # the new table created (or evolved) and claimed before ZooKeeper points at it
    store.rebind(current, reset_origins=not data_moved,
                 event=Bind(utc_now_iso(), getpass.getuser(), to=current.to_json(), data_moved=data_moved,
                            previous=bound.to_json() if bound else None))
    out("bound; recorded in ZooKeeper")
    return EXIT_OK
