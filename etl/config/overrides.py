"""Environment overrides of the INI file, and the effective config as `etl config` shows it.

`ETL__<SECTION>__<KEY>=value` sets [section] key, replacing the file's value or adding the
key (and the section). Names are matched without regard to case, and `_` in the variable's
name matches `_`, `.`, `-` or a space in the file's name, so ETL__KAFKA__BOOTSTRAP_SERVERS
sets [kafka] bootstrap.servers when the file has it, and ETL__DIMENSION_COUNTRIES__SOURCE
sets [dimension countries] source. A key the file lacks is matched the same way against the
keys the ETL knows; failing that it is added in lower case ([kafka]: with `.` for `_`, as
librdkafka spells its keys, so ETL__KAFKA__SASL_MECHANISM adds sasl.mechanism), unless the
variable writes it with a `.` (ETL__SPARK__spark.sql.shuffle.partitions), which is taken as
written. The value is taken as is: no comment is stripped from it.

Overrides are applied before validation, so a bad value exits 2 like a bad line, and the
error names the variable.
"""
from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from typing import Mapping

from etl.config.ini import holds_secret, is_java_options_key, mask_java_properties
from etl.config.kafka import KAFKA_SECRET_KEYS
from etl.config.keys import names_in
from etl.errors import ConfigError

# librdkafka keys the ETL knows, besides the table's: a variable's name cannot tell their `.` from `_`.
PASSED_THROUGH_KEYS = {"kafka": KAFKA_SECRET_KEYS}
PREFIX = "ETL__"
MASK = "***"
_URL_PASSWORD_RE = re.compile(r"(?P<head>\w[\w+.-]*://[^/:@\s]+:)[^/@\s]+(?=@)")


@dataclass(frozen=True)
class Override:
    variable: str  # the environment variable, e.g. ETL__KAFKA__BOOTSTRAP_SERVERS
    section: str  # as applied, e.g. kafka
    key: str  # as applied, e.g. bootstrap.servers
    value: str


def apply_env_overrides(parser: configparser.ConfigParser, environ: Mapping[str, str]) -> tuple[Override, ...]:
    """Set every ETL__ variable of `environ` into `parser`; return what was set, sorted by variable."""
    applied = []
    for variable in sorted(name for name in environ if name.upper().startswith(PREFIX)):
        section_name, _, key_name = variable[len(PREFIX):].partition("__")
        if not section_name or not key_name:
            raise ConfigError(f"environment variable {variable}: is not {PREFIX}<SECTION>__<KEY> "
                              f"(e.g. {PREFIX}KAFKA__TOPICS); unset it or name a section and a key")
        section = _match(section_name, parser.sections()) or section_name.lower()
        if not parser.has_section(section):
            parser.add_section(section)
        key = _match(key_name, [*parser[section], *_known_keys(section)]) or _new_key(section, key_name)
        parser.set(section, key, environ[variable])
        applied.append(Override(variable, section, key, environ[variable]))
    return tuple(applied)


def _new_key(section: str, name: str) -> str:
    if "." in name:
        return name
    # librdkafka's keys are dot-separated lower-case words (sasl.mechanism); the ETL's own
    # [kafka] keys are the table's (_known_keys)
    return name.lower().replace("_", ".") if section == "kafka" else name.lower()


def _known_keys(section: str) -> tuple[str, ...]:
    """The keys of `section` the ETL knows, whose spelling (`.` or `_`?) a variable's name cannot tell."""
    return (*names_in(section), *PASSED_THROUGH_KEYS.get(section, ()))


def _fold(name: str) -> str:
    return re.sub(r"[._\- ]", "_", name).lower()


def _match(name: str, existing: list[str]) -> str | None:
    return next((candidate for candidate in existing if _fold(candidate) == _fold(name)), None)


def naming_the_variable(exc: ConfigError, overrides: tuple[Override, ...]) -> ConfigError:
    """`exc`, saying which environment variable set the value it is about, if one did."""
    message = str(exc)
    for override in overrides:
        if f"[{override.section}] {override.key}:" in message or f"[{override.section}]:" in message \
                or f"section [{override.section}]" in message:
            return type(exc)(f"{message} (set by the environment variable {override.variable})")
    return exc


def masked(section: str, key: str, value: str) -> str:
    """The value of [section] key as it may be shown: a secret key's value hidden (etl.config.ini.
    holds_secret), a URL's password hidden, and in JVM options a secret system property's value
    (-Dx.keyStorePassword=...)."""
    if holds_secret(section, key):
        return MASK if value else value
    if is_java_options_key(key):
        value = mask_java_properties(value, MASK)
    return _URL_PASSWORD_RE.sub(lambda m: m.group("head") + MASK, value)


def render_effective(parser: configparser.ConfigParser, overrides: tuple[Override, ...], source: str) -> str:
    """The effective config as INI, secrets masked, each overridden key marked with its variable."""
    by_key = {(o.section, o.key): o.variable for o in overrides}
    lines = [f"; {source}, with {len(overrides)} environment override(s); secrets shown as {MASK}"]
    for section in parser.sections():
        lines += ["", f"[{section}]"]
        for key, value in parser[section].items():
            shown = masked(section, key, value).replace("\n", "\n    ")
            variable = by_key.get((section, key))
            lines += [f"; from the environment: {variable}"] if variable else []
            lines.append(f"{key} = {shown}")
    return "\n".join(lines) + "\n"
