"""[kafka] topics_regex, matched by RE2: in time linear in the topic name's length, whatever the
pattern.

Python's `re` backtracks: a pattern with nested quantifiers, `rt_redos_(a+)+`, against one topic
named `rt_redos_` and 34 `a` then `-` takes 2**34 steps, and every command (each asks the broker's
topics and matches them) hangs at 100% CPU with no output; `etl run` hangs holding the job lock,
so every scheduled run after it exits as "lock held". Refusing nested quantifiers at start-up
would catch that one shape, not overlapping alternatives (`(a|aa)*`) or a pattern no check
foresaw, and a time limit cannot interrupt `re`'s C loop. RE2 (Google's engine, the
`google-re2` wheel) never backtracks. It reads the same syntax for everything a topic pattern
needs (classes, groups, alternation, counted repeats, `(?i)`, named groups), and refuses what it
cannot do in linear time, lookarounds and back-references; such a pattern exits 2 naming the key
(a list of topics in [kafka] topics, or a pattern without them, does the same job).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would also print its refusal to stderr itself; the ConfigError says it


@dataclass(frozen=True)
class TopicPattern:
    """A compiled topics_regex; equal to another of the same text."""

    pattern: str
    _compiled: object = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            compiled = re2.compile(self.pattern, _OPTIONS)
        except re2.error as exc:
            why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            raise ValueError(f"not a pattern RE2 can run ({why}); topics_regex is matched by RE2, which never "
                             f"takes more than linear time, and reads Python's syntax but for lookarounds and "
                             f"back-references: write the pattern without them, or list the topics in [kafka] "
                             f"topics") from None
        object.__setattr__(self, "_compiled", compiled)

    def fullmatch(self, name: str) -> bool:
        return self._compiled.fullmatch(name) is not None  # type: ignore[attr-defined]
