"""The filter of a rollup (`[rollup <name>] where = ...`, etl.config.rollups):
a small expression language, parsed once into a typed tree. Columns are named and checked, and
nothing is passed through as SQL.

    where = level = 'ERROR' and (status >= 500 or path in ('/a', '/b')) and user_id is not null

Keywords are case-insensitive:

    expr      := and ("or" and)*
    and       := not ("and" not)*
    not       := "not" not | "(" expr ")" | predicate
    predicate := operand compare operand
               | operand "is" ["not"] "null"
               | operand ["not"] "in" "(" literal ("," literal)* ")"
    compare   := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    operand   := column | literal
    literal   := 'text' (a quote inside doubled: '') | number | true | false

A mistake is a ValueError saying where in the text, and what was expected there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Callable, Union

_TOKEN_RE = re.compile(r"\s*(?:(?P<text>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)"
                       r"|(?P<op><=|>=|!=|<>|=|<|>)|(?P<punct>[(),])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false"})


class Comparison(Enum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


@dataclass(frozen=True)
class Column:
    name: str  # lower-cased, as the table's columns are


@dataclass(frozen=True)
class Literal:
    value: str | int | Decimal | bool


Operand = Union[Column, Literal]


@dataclass(frozen=True)
class Compare:
    op: Comparison
    left: Operand
    right: Operand


@dataclass(frozen=True)
class IsNull:
    operand: Operand
    negated: bool = False


@dataclass(frozen=True)
class In:
    operand: Operand
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True)
class And:
    parts: tuple["Expr", ...]


@dataclass(frozen=True)
class Or:
    parts: tuple["Expr", ...]


@dataclass(frozen=True)
class Not:
    part: "Expr"


Expr = Union[Compare, IsNull, In, And, Or, Not]


@dataclass(frozen=True)
class _Token:
    kind: str  # text, number, op, punct, word, end
    value: str
    at: int  # its offset in the text, for messages


def parse_filter(text: str) -> Expr:
    """The filter `text` as a tree; ValueError naming the position of the first mistake."""
    parser = _Parser(text, _tokens(text))
    expr = parser.expression()
    parser.expect_end()
    return expr


def columns_of(expr: Expr) -> set[str]:
    """The columns a filter reads, to check against the table's."""
    if isinstance(expr, (And, Or)):
        return set().union(*(columns_of(part) for part in expr.parts))
    if isinstance(expr, Not):
        return columns_of(expr.part)
    operands = (expr.left, expr.right) if isinstance(expr, Compare) else (expr.operand,)
    return {operand.name for operand in operands if isinstance(operand, Column)}


def _tokens(text: str) -> list[_Token]:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN_RE.match(text, at)
        if match is None or match.end() == at:
            if not text[at:].strip():
                break
            position = at + len(text[at:]) - len(text[at:].lstrip())
            if text[position] == "'":
                raise ValueError(f"at character {position + 1}: a 'text' that is never closed (a quote inside it is "
                                 f"written twice: 'it''s')")
            raise ValueError(f"at character {position + 1}: {text[position]!r} is not part of the language "
                             f"(columns, 'text', numbers, =, !=, <, <=, >, >=, and, or, not, in, is null)")
        kind = match.lastgroup or "end"
        tokens.append(_Token(kind, match[kind], match.start(kind)))
        at = match.end()
    return tokens + [_Token("end", "", len(text))]


class _Parser:
    def __init__(self, text: str, tokens: list[_Token]):
        self.text, self.tokens, self.index = text, tokens, 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def expression(self) -> Expr:
        return self._joined("or", self._and, Or)

    def expect_end(self) -> None:
        if self.token.kind != "end":
            raise self._error("an end, or `and` / `or` and another condition")

    def _and(self) -> Expr:
        return self._joined("and", self._not, And)

    def _joined(self, word: str, part: Callable[[], Expr], join: Callable[[tuple[Expr, ...]], Expr]) -> Expr:
        """One or more `part`s separated by the keyword `word`, joined when there are several."""
        parts = [part()]
        while self._keyword(word):
            parts.append(part())
        return parts[0] if len(parts) == 1 else join(tuple(parts))

    def _not(self) -> Expr:
        if self._keyword("not"):
            return Not(self._not())
        if self._punct("("):
            inner = self.expression()
            if not self._punct(")"):
                raise self._error("`)`")
            return inner
        return self._predicate()

    def _predicate(self) -> Expr:
        left = self._operand()
        if self.token.kind == "op":
            op = Comparison("!=" if self.token.value == "<>" else self.token.value)
            self.index += 1
            return Compare(op, left, self._operand())
        if self._keyword("is"):
            negated = self._keyword("not")
            if not self._keyword("null"):
                raise self._error("`null` after `is`" + (" not" if negated else ""))
            return IsNull(left, negated)
        negated = self._keyword("not")
        if self._keyword("in"):
            return In(left, self._list(), negated)
        raise self._error("a comparison (=, !=, <, <=, >, >=), `is [not] null` or `[not] in (...)`")

    def _list(self) -> tuple[Literal, ...]:
        if not self._punct("("):
            raise self._error("`(` and the values")
        values = [self._literal()]
        while self._punct(","):
            values.append(self._literal())
        if not self._punct(")"):
            raise self._error("`,` or `)`")
        return tuple(values)

    def _operand(self) -> Operand:
        token = self.token
        if token.kind == "word" and token.value.lower() not in _KEYWORDS:
            self.index += 1
            return Column(token.value.lower())
        return self._literal()

    def _literal(self) -> Literal:
        token = self.token
        if token.kind == "text":
            value: str | int | Decimal | bool = token.value[1:-1].replace("''", "'")
        elif token.kind == "number":
            value = Decimal(token.value) if "." in token.value else int(token.value)
        elif token.kind == "word" and token.value.lower() in ("true", "false"):
            value = token.value.lower() == "true"
        else:
            raise self._error("a column or a value ('text', a number, true or false)")
        self.index += 1
        return Literal(value)

    def _keyword(self, word: str) -> bool:
        return self._accept("word", word)

    def _punct(self, mark: str) -> bool:
        return self._accept("punct", mark)

    def _accept(self, kind: str, value: str) -> bool:
        """Step over the next token if it is `value` (a keyword in any case)."""
        if self.token.kind == kind and self.token.value.lower() == value:
            self.index += 1
            return True
        return False

    def _error(self, expected: str) -> ValueError:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.value)
        return ValueError(f"at character {token.at + 1}: expected {expected}, found {found}")
