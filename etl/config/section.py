"""Typed, key-checked reading of one INI section, and the value checks that several sections share.

Every failure is a ConfigError naming the file, the section and the key, so that an operator
can find the line at fault.
"""
from __future__ import annotations

import configparser
import math
import re
from pathlib import Path
from typing import Any, Callable

from etl.config.keys import Absent, Derived, Key, UndeclaredKey, ValueKind, closest_name, declared_key
from etl.config.model import HIVE_NAME_RE
from etl.errors import ConfigError

FROM_TABLE = object()  # a default not given: the table's
# A function a section names by module:function ([job] transform, a route's transform).
TRANSFORM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class Section:
    """Typed, key-checked access to one INI section; remembers which keys were read. Each key it
    reads is declared in etl.config.keys, whose entry gives the default and, for a plain type, the
    converter; the caller passes a converter that checks more, and the default the entry says is
    derived from other settings."""

    def __init__(self, parser, name: str, path: Path, required: bool = True):
        if required and not parser.has_section(name):
            raise ConfigError(f"{path}: section [{name}] is missing")
        self.name, self.path = name, path
        self.values = dict(parser[name]) if parser.has_section(name) else {}
        self.read: set[str] = set()

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: [{self.name}] {key}: {why}")

    def is_set(self, key: str) -> bool:
        """Whether the key has a value, which is not looked at: for keys that only some settings allow."""
        declared_key(self.name, key)
        self.read.add(key)
        return bool(self.values.get(key, "").strip())

    def get(self, key: str, default: object = FROM_TABLE, convert: Callable | None = None,
            required: bool | None = None):
        """The key's value, converted; its default when the key is unset or empty. `required`: unless
        given, as the table says."""
        entry = declared_key(self.name, key)
        self.read.add(key)
        convert = convert or _plain_converter(entry)
        raw = self.values.get(key, "").strip()
        if not raw:
            must = (entry.default is Absent.REQUIRED) if required is None else required
            if must:
                raise self.fail(key, "is required")
            if isinstance(entry.default, str):
                raw = _table_default(entry, default)
            else:
                return _absent_default(entry, default)
        try:
            return convert(raw)
        except (ValueError, TypeError) as exc:
            raise self.fail(key, f"{raw!r} is not valid: {exc}") from exc

    def choice(self, key: str, default: object = FROM_TABLE) -> Any:
        """The member of the key's choices (its table entry's enum, which the caller's field is
        typed with) it names; the message lists them all, in their order."""
        choices = declared_key(self.name, key).choices
        if choices is None:
            raise UndeclaredKey(f"[{self.name}] {key} is read as a choice, and etl/config/keys.py gives it none")
        value = self.get(key, default, lambda raw: raw)
        if value not in tuple(choices):  # members equal their strings
            raise self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return choices(value)

    def positive(self, key: str, convert: Callable | None = None):
        value = self.get(key, convert=convert)
        if not math.isfinite(value) or value <= 0:  # nan <= 0 is False: nan would pass a plain check
            raise self.fail(key, f"must be greater than 0 (and finite), got {value}")
        return value

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.values) - self.read)
        if unknown:
            raise self.fail(unknown[0], f"unknown key; known keys in [{self.name}]: {sorted(self.read)}"
                                        + did_you_mean(self.name, unknown[0]))


def did_you_mean(section: str, key: str, others: tuple[str, ...] = ()) -> str:
    """A hint naming the declared key of `section` (or of `others`) that `key` most likely misspells, or nothing."""
    meant = closest_name(section, key, others)
    return f"; did you mean `{meant}`?" if meant else ""


def _plain_converter(entry: Key) -> Callable:
    plain = _PLAIN_CONVERTERS.get(entry.kind)
    if plain is None:
        raise UndeclaredKey(f"[{entry.section}] {entry.name} is {entry.kind.value}, which has no plain converter: "
                            f"the code that reads it passes one")
    return plain


def _table_default(entry: Key, given: object) -> str:
    """The entry's default, as INI text, converted as a written value would be."""
    if given is not FROM_TABLE:
        raise UndeclaredKey(f"[{entry.section}] {entry.name}: its default is etl/config/keys.py's; pass none")
    assert isinstance(entry.default, str)
    return entry.default


def _absent_default(entry: Key, given: object):
    """What an unset key stands for: the caller's value when the table says the default is
    derived (it must pass one) or unset (None unless it passes another: an empty tuple)."""
    if given is FROM_TABLE:
        if isinstance(entry.default, Derived):
            raise UndeclaredKey(f"[{entry.section}] {entry.name}: its default is derived; pass it")
        return None
    return given


def boolean(raw: str) -> bool:
    value = configparser.ConfigParser.BOOLEAN_STATES.get(raw.lower())
    if value is None:
        raise ValueError("write true or false")
    return value


_PLAIN_CONVERTERS: dict[ValueKind, Callable] = {ValueKind.TEXT: str, ValueKind.INTEGER: int, ValueKind.NUMBER: float,
                                                ValueKind.BOOLEAN: boolean}


def non_negative_seconds(raw: str, unit: str = "seconds") -> float:
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a number of {unit}, 0 or more")
    return value


def matching(regex: re.Pattern, what: str) -> Callable[[str], str]:
    def convert(raw: str) -> str:
        if not regex.match(raw):
            raise ValueError(f"not a valid {what}")
        return raw
    return convert


def column_list(raw: str) -> tuple[str, ...]:
    """Column names, comma-separated, each once (Hive folds case, so Id and id are one)."""
    columns = tuple(c.strip() for c in raw.split(",") if c.strip())
    for name in columns:
        if not HIVE_NAME_RE.match(name):
            raise ValueError(f"{name!r} is not a column name")
    if not columns or len({c.lower() for c in columns}) != len(columns):
        raise ValueError("list each column once, comma-separated")
    return columns


def hive_name(what: str) -> Callable[[str], str]:
    matches = matching(HIVE_NAME_RE, what)
    return lambda raw: matches(raw).lower()


def plain_location(raw: str) -> None:
    """Locations reach SQL (CREATE DATABASE ... LOCATION, ADD PARTITION ... LOCATION) as
    literals: refused here, before any statement runs, rather than trusted to quoting alone."""
    bad = sorted({c for c in raw if c in "'\\\"`" or ord(c) < 32 or ord(c) == 127})
    if bad:
        raise ValueError(f"must not contain {', '.join(repr(c) for c in bad)}: a location is written into Hive "
                         "statements; percent-encode such characters or choose another folder")


def resolve(base: Path, raw: str) -> Path:
    """A relative schema path is tried against the config's folder, then the working dir."""
    candidate = Path(raw)
    if candidate.is_absolute():
        return candidate
    beside = (base / candidate).resolve()
    return beside if beside.exists() else candidate.resolve()


def read_secret_files(s: Section, client: dict, keys: tuple[str, ...]) -> None:
    """Each secret `key` whose `<key>_file` is set, read from that file into `client` (a
    client's settings); the key and its file both set is an error."""
    for key in keys:
        secret = secret_file(s, f"{key}_file")
        if secret is not None and key in client:
            raise s.fail(f"{key}_file", f"set either {key} or {key}_file, not both")
        if secret is not None:
            client[key] = secret


def secret_file(s: Section, key: str) -> str | None:
    """The secret held by the file that `key` names (relative to the config's folder), or None
    when the key is not set. The file holds the secret alone; a trailing line break is dropped."""
    path = s.get(key, convert=lambda raw: resolve(s.path.parent, raw))
    if path is None:
        return None
    try:
        secret = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise s.fail(key, f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    secret = secret.removesuffix("\n").removesuffix("\r")
    if not secret or "\n" in secret:
        raise s.fail(key, f"{path} must hold the secret alone, on one line")
    return secret
