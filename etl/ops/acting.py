"""Whether an operator command that changes the job's state acts, or only shows what it would do.

Every such command (`etl recover`, `reset-offsets`, `bind`, `compact`) previews by default and
acts with `--execute`, as Kafka's own `kafka-consumer-groups --reset-offsets` does: an operator
who types the command to look, or a copy-pasted line, never changes anything by accident. A
preview that found nothing wrong exits 0. What a command will not do is an error, previewed or
not: `reset-offsets` and `bind` raise etl.errors.Refused (exit 2, or 1 when something under way
must finish first), `recover` reports what needs an operator's decision and exits 1, and
`compact` refuses an open batch (exit 1). `etl run` is not one of them: it is the scheduled job,
and its preview is `etl run --dry-run`.
"""
from __future__ import annotations

import argparse
import logging
from enum import Enum

log = logging.getLogger("etl")


class Act(Enum):
    PREVIEW = "preview"
    EXECUTE = "execute"

    @property
    def executes(self) -> bool:
        return self is Act.EXECUTE


# The last line of every preview that would have changed something.
PREVIEW_LAST_LINE = "preview: nothing changed; pass --execute to apply"


def stops_at_preview(act: Act, out) -> bool:
    """True, having said the preview's last line, when the command only shows what it would do."""
    if not act.executes:
        out(PREVIEW_LAST_LINE)
    return not act.executes


_OLD_FLAGS = {"--yes": "use --execute", "--dry-run": "a preview is the default now; --execute acts"}


def add_act_options(command: argparse.ArgumentParser, old_flag: str) -> None:
    """--execute, and the flag the command took before every command previewed by default (kept
    for one release, with a warning)."""
    chosen = command.add_mutually_exclusive_group()
    chosen.add_argument("--execute", dest="act", action="store_const", const=Act.EXECUTE, default=Act.PREVIEW,
                        help="do it; without it the command only shows what it would do, and changes nothing")
    chosen.add_argument(old_flag, dest="old_flag", action="store_const", const=old_flag, default=None,
                        help=f"deprecated: {_OLD_FLAGS[old_flag]}")


def act_of(args: argparse.Namespace) -> Act:
    """What the command does, the old flag's warning logged."""
    if args.old_flag is None:
        return args.act
    log.warning("%s is deprecated and goes in the next release: %s", args.old_flag, _OLD_FLAGS[args.old_flag])
    return Act.EXECUTE if args.old_flag == "--yes" else Act.PREVIEW
