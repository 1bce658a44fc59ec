"""The JSON decoder's input side: messages screened for what pyarrow's reader would misread,
joined into one newline-delimited block, and read in the read types; plus the parse
errors' row numbers and wording."""
from __future__ import annotations

import itertools
import json
import re
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from etl.rows.decoders.base import EMPTY_MESSAGE, mask_without

_JSON_OBJECT_START_RE = r"^[ \t\r\n]*\{"
_JSON_KINDS: dict[type, str] = {list: "array", str: "string", bool: "boolean", type(None): "null", int: "number",
                                float: "number"}
_BOM = b"\xef\xbb\xbf"  # U+FEFF in UTF-8
# RapidJSON, under pyarrow's reader, accepts NaN, Inf and Infinity (signed) as numbers; JSON does
# not. A literal is one outside any string: after the complete strings and other characters
# from the start, in a value's place. Screened for with a plain substring search first.
_NON_JSON_HINT_RE = r"NaN|Inf"
_NON_JSON_LITERAL_RE = r'^(?:[^"\\]|"(?:[^"\\]|\\.)*")*[\[:,][ \t\r\n]*-?(?:NaN|Inf)'
_NON_JSON_FIELD_RE = re.compile(
    rb'^(?:[^"\\]|"(?:[^"\\]|\\.)*")*?(?:"((?:[^"\\]|\\.)*)"[ \t\r\n]*:|[\[:,])[ \t\r\n]*(-?(?:NaN|Inf(?:inity)?))',
    re.S)
_MAX_BLOCK_SIZE = 2**31 - 1
# _hinted_anywhere's block: 256 KiB stays in a core's cache (1 MiB blocks were 6x slower).
HINT_SCAN_BLOCK = 1 << 18
_N, _LOWER_A, _I, _LOWER_N, _LOWER_F = b"NaInf"  # the bytes of NaN and Inf, as ints


class JsonLines:
    """Messages as newline-delimited JSON, joined once so that any range is a zero-copy slice."""

    def __init__(self, messages: Sequence[bytes]):
        data = b"\n".join(messages)
        if data.count(b"\n") != max(len(messages) - 1, 0):
            # b"\r", not a space: both are whitespace between JSON tokens, and a raw CR inside
            # a string is as invalid as the raw LF it replaces, so no bad record turns good.
            messages = [message.replace(b"\n", b"\r") for message in messages]
            data = b"\n".join(messages)
        self.messages = messages
        self.data = pa.py_buffer(data)
        self._starts: list[int] | None = None

    def __len__(self) -> int:
        return len(self.messages)

    def block(self, lo: int, hi: int) -> pa.Buffer:
        """Messages lo..hi-1 as one buffer."""
        if lo == 0 and hi == len(self.messages):
            return self.data
        starts = self._line_starts()
        return self.data.slice(starts[lo], starts[hi] - 1 - starts[lo])

    def _line_starts(self) -> list[int]:
        # Computed on the error path only; map/accumulate keep the loop in C.
        if self._starts is None:
            self._starts = list(itertools.accumulate(map((1).__add__, map(len, self.messages)), initial=0))
        return self._starts


def json_read_field(field: pa.Field) -> pa.Field:
    """How the JSON reader reads a column: dates and timestamps as text, floats as doubles,
    converted afterwards (a double too large for float would silently become infinite)."""
    if field.type == pa.date32() or pa.types.is_timestamp(field.type):
        return field.with_type(pa.string())
    if field.type == pa.float32():
        return field.with_type(pa.float64())
    return field


def read_json(block: pa.Buffer, read_schema: pa.Schema) -> pa.Table:
    """Newline-delimited JSON in the read types. Raises pa.ArrowInvalid."""
    reader = pa_json.open_json(  # much cheaper per call than read_json, which matters on the error path
        pa.BufferReader(block),
        # One block: the chunk is already in memory, and one block means no straddling.
        read_options=pa_json.ReadOptions(use_threads=False, block_size=min(block.size + 1, _MAX_BLOCK_SIZE)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=read_schema, unexpected_field_behavior="ignore", newlines_in_values=False
        ),
    )
    return reader.read_all()


def json_object_candidates(values: Sequence[bytes | None]) -> tuple[Sequence[int], list[tuple[int, str]],
                                                                    Sequence[bytes | None]]:
    """Indices of the values that start like a JSON object, errors for the others, and the values
    to parse: `values`, or a copy without the UTF-8 byte-order mark some start with.

    Screening matters for correctness, not only speed: pyarrow reads a top-level `null`
    as an all-NULL row (or crashes when it comes first), which would misalign the rows.
    """
    binary = pa.array(values, pa.binary())
    starts_ok = pc.starts_with(binary, "{")  # nearly always so, and 10x cheaper than the regex
    all_start = _all_true(starts_ok)
    if not all_start:
        values, binary = _without_byte_order_marks(values, binary)
        starts_ok = pc.match_substring_regex(binary, _JSON_OBJECT_START_RE)  # leading whitespace is allowed
        all_start = _all_true(starts_ok)
    literals = _non_json_literal_positions(binary)
    if all_start and not literals:
        return range(len(values)), [], values
    flags = pc.and_kleene(starts_ok, mask_without(len(values), literals)).to_pylist()
    errors = [(i, _non_json_literal_reason(values[i]) if starts_ok[i].as_py() else _not_an_object_reason(values[i]))
              for i, ok in enumerate(flags) if not ok]
    return [i for i, ok in enumerate(flags) if ok], errors, values


def _without_byte_order_marks(values: Sequence[bytes | None], binary: pa.BinaryArray) \
        -> tuple[Sequence[bytes | None], pa.BinaryArray]:
    """The values with one leading UTF-8 byte-order mark removed. RFC 8259 (8.1) lets a parser
    ignore it, and producers on Windows write it (.NET's Encoding.UTF8, PowerShell): the object
    after it is unambiguous, so rejecting it would only leave good records to replay by hand."""
    marked = pc.indices_nonzero(pc.fill_null(pc.starts_with(binary, _BOM.decode()), False)).to_pylist()
    if not marked:
        return values, binary
    stripped = list(values)
    for i in marked:
        stripped[i] = stripped[i][len(_BOM):]
    return stripped, pa.array(stripped, pa.binary())


def _all_true(flags: pa.BooleanArray) -> bool:
    """True when every flag is true (a NULL value gives a NULL flag, which is not)."""
    return flags.null_count == 0 and pc.all(flags).as_py()


def _non_json_literal_positions(binary: pa.BinaryArray) -> list[int]:
    """Positions of the messages using NaN or Infinity as a value, which RapidJSON accepts."""
    if not _hinted_anywhere(binary):
        return []
    hinted = pc.match_substring_regex(binary, _NON_JSON_HINT_RE)
    positions = pc.indices_nonzero(hinted)
    found = pc.match_substring_regex(binary.take(positions), _NON_JSON_LITERAL_RE)
    return positions.filter(found).to_pylist()


def _hinted_anywhere(binary: pa.BinaryArray) -> bool:
    """Whether NaN or Inf occurs anywhere in the values' bytes: a scan of the array's data
    buffer, 10x cheaper than the per-value regex, which only runs when it does. The buffer is
    read in place, in cache-sized blocks, by numpy: copying it into bytes for `in` and scanning
    it twice took a third of a 1,200-byte record's task time (py-spy, the side-by-side bench)."""
    data = binary.buffers()[2]
    if data is None:
        return False
    raw = np.frombuffer(data, dtype=np.uint8)
    for start in range(0, len(raw), HINT_SCAN_BLOCK):
        block = raw[start:start + HINT_SCAN_BLOCK + 2]  # 2 more: a literal across the edge is whole
        first = np.flatnonzero((block[:-2] == _N) | (block[:-2] == _I))
        if len(first) and _starts_a_hint(block, first):
            return True
    return False


def _starts_a_hint(block: np.ndarray, first: np.ndarray) -> bool:
    """Whether any of the positions `first` (of an N or an I) starts NaN or Inf in `block`."""
    head, second, third = block[first], block[first + 1], block[first + 2]
    nan = (head == _N) & (second == _LOWER_A) & (third == _N)
    inf = (head == _I) & (second == _LOWER_N) & (third == _LOWER_F)
    return bool(np.any(nan | inf))


def _non_json_literal_reason(value: bytes) -> str:
    match = _NON_JSON_FIELD_RE.search(value)
    literal = match[2].decode() if match else "NaN or Infinity"
    text = f"{literal} is not valid JSON (JSON has no NaN or Infinity); send null"
    if match and match[1] is not None:
        return f"field '{match[1].decode('utf-8', 'replace')}': {text}"
    return f"invalid JSON: {text}"


def _not_an_object_reason(value: bytes | None) -> str:
    text = (value or b"").lstrip(b" \t\r\n")
    if not text:
        return EMPTY_MESSAGE
    kind = _json_kind(text)
    return f"expected a JSON object, got {kind}" if kind else "invalid JSON: expected a JSON object"


def _json_kind(text: bytes) -> str | None:
    """What JSON value `text` is whole, or None if it is none: its first byte is not enough
    (`not json` starts like null, `42abc` like a number). Parsed only on the error path."""
    try:
        value = json.loads(text.decode("utf-8"), parse_constant=refuse_constant)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    return _JSON_KINDS.get(type(value))


def refuse_constant(name: str):
    """For json.loads: NaN and Infinity are not JSON (Python's parser takes them)."""
    raise ValueError(f"{name} is not JSON")


def blamed_row(message: str, rows: int) -> int | None:
    """The row a JSON parse error names; only parse errors name one, conversion errors do not."""
    match = re.search(r" in row (\d+)$", message)
    return int(match[1]) if match and int(match[1]) < rows else None


def good_indices(candidates: Sequence[int], bad_positions: list[int]) -> pa.Int64Array:
    """The candidates but those at bad_positions: what the parsed tables hold, in order."""
    positions = pc.indices_nonzero(mask_without(len(candidates), bad_positions)).cast(pa.int64())
    return positions if isinstance(candidates, range) else pc.take(pa.array(candidates, pa.int64()), positions)


def parse_error_detail(message: str) -> str:
    detail = re.sub(r"^JSON parse error: (Column\(\) )?| in row \d+$", "", message)
    if detail.startswith("Invalid encoding in string"):
        # What RapidJSON says about a raw control character (tab, newline) inside a string.
        return f"{detail} (a raw control character inside a string? escape it, e.g. as \\n)"
    return detail
