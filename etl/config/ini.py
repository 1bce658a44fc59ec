"""The INI syntax of a job's config: one parser, with the options every reader of it uses
(load_config, `etl config`, the docs' snippet test), and which keys hold secrets: a key of the
table (etl.config.keys) as its entry says, a pass-through key ([kafka]'s librdkafka keys, [spark]'s)
by its name.

Comments: a line that starts with `#` or `;` is a comment, and so is the rest of a line
from ` #` or ` ;` on (the marker must follow whitespace): `hosts = zk1:2181  # the quorum`.
A value cannot hold ` #` or ` ;` itself; a `#` or `;` with no space before it stays in the
value (`url = http://host/#fragment`, `topics_regex = ^a;b$`). A secret key refuses a
comment after its value: a password such as `abc #1` would be cut short without a word, so
the line must hold the value alone (or the secret goes in its `*_file` key).
"""
from __future__ import annotations

import configparser
import re
from pathlib import Path

from etl.config.keys import declared
from etl.errors import ConfigError

COMMENT_PREFIXES = ("#", ";")
# A pass-through key whose value is a secret: passwords, client secrets, tokens, key material
# and `user:password` pairs. A `*_file` or `*.location` key names a file, which is no secret.
_SECRET_KEY_RE = re.compile(r"password|secret|token|user\.info|credential|jaas|private|oauthbearer\.config|"
                            r"key\.pem$|\.key$", re.I)
_FILE_KEY_RE = re.compile(r"(_file|\.location)$")


def new_parser(inline_comments: bool = True) -> configparser.ConfigParser:
    """An empty parser with the config's syntax: `=` only (Kafka and Spark values hold `:`),
    no interpolation (values hold `%`), keys' case kept (Kafka and Spark keys are case-sensitive)."""
    parser = configparser.ConfigParser(
        interpolation=None, delimiters=("=",),
        inline_comment_prefixes=COMMENT_PREFIXES if inline_comments else None)
    parser.optionxform = str
    return parser


def holds_secret(section: str, key: str) -> bool:
    """Whether [section] key's value is a secret: as the table says for a key it declares, else by
    the key's name, since librdkafka's and Spark's keys are too many to list."""
    entry = declared(section, key)
    return entry.secret if entry is not None else is_secret_key(key)


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY_RE.search(key)) and not _FILE_KEY_RE.search(key)


# A JVM system property inside a *JavaOptions value (spark.driver.extraJavaOptions ...), with its
# value as the JVM's command line splits it: -Dname=value, -Dname='a b', -Dname="a b".
_JAVA_PROPERTY_RE = re.compile(r"""(?P<head>(?<!\S)-D(?P<name>[^=\s]+)=)(?P<value>"[^"]*"|'[^']*'|\S*)""")


_FILE_PROPERTY_RE = re.compile(r"(\.file|File|\.location|\.path)$")  # names a file: no secret


def is_java_options_key(key: str) -> bool:
    return key.endswith("JavaOptions")


def _is_secret_property(name: str) -> bool:
    return is_secret_key(name) and not _FILE_PROPERTY_RE.search(name)


def secret_java_properties(value: str) -> list[str]:
    """The secret system properties (-Djavax.net.ssl.keyStorePassword=...) in a *JavaOptions value,
    as -D<name>, without their values."""
    return [f"-D{m['name']}" for m in _JAVA_PROPERTY_RE.finditer(value) if _is_secret_property(m["name"])]


def mask_java_properties(value: str, mask: str) -> str:
    """The *JavaOptions value with each secret system property's value replaced by `mask`."""
    return _JAVA_PROPERTY_RE.sub(lambda m: m["head"] + mask if _is_secret_property(m["name"]) else m[0], value)


def read_ini(path: Path) -> configparser.ConfigParser:
    """The file at `path`, parsed; a syntax error is a ConfigError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    return parse_ini(text, str(path))


def parse_ini(text: str, source: str) -> configparser.ConfigParser:
    """`text` parsed as a config file named `source`; a syntax error is a ConfigError."""
    parser, verbatim = new_parser(), new_parser(inline_comments=False)
    try:
        parser.read_string(text, source=source)
        verbatim.read_string(text, source=source)
    except configparser.Error as exc:
        raise ConfigError(f"{source}: cannot parse: {exc}") from exc
    _refuse_comments_after_secrets(parser, verbatim, source)
    return parser


def _refuse_comments_after_secrets(parser, verbatim, source: str) -> None:
    for section in parser.sections():
        for key, value in parser[section].items():
            if holds_secret(section, key) and verbatim[section][key] != value:
                raise ConfigError(f"{source}: [{section}] {key}: a secret's line must hold its value alone: ' #' or "
                                  f"' ;' would start a comment, and a password may contain either; put a comment "
                                  f"on a line of its own, or the secret in {key}_file")
