"""Quoting for everything that reaches Spark SQL: one place, used by every statement."""
from __future__ import annotations


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier in backticks; a backtick inside is doubled."""
    return "`" + name.replace("`", "``") + "`"


def quote_literal(text: str) -> str:
    """A single-quoted Spark SQL string literal: Spark unescapes backslash sequences, so a
    backslash and a quote are escaped with a backslash."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
