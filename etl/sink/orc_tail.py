"""User metadata in an ORC file's footer, which pyarrow's ORC writer cannot write.

ORC keeps key-value metadata in its footer (`Footer.metadata`, repeated `UserMetadataItem`),
as Parquet does, and every ORC reader (ORC's Java and C++ libraries, so Hive, Spark and
pyarrow) reads it. pyarrow's writer has no way to set it. So the sink holds back the bytes the
writer produces while it closes (the last stripe and the file's tail) and adds the items before
they are written:
- the footer gets one more chunk: the encoded items, in an *original* (uncompressed) chunk,
  which any compressed ORC stream may hold. Decompressed, the footer is its old bytes followed
  by the new fields, and a protobuf message that repeats a repeated field appends to it;
- the PostScript's footer length grows by the bytes added; nothing else in the file moves,
  since every other offset counts from the file's start.
The layout is ORC's specification (orc/proto/orc_proto.proto, "File Tail").
"""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, BinaryIO, Iterator, Mapping

if TYPE_CHECKING:  # Python 3.12's collections.abc.Buffer, for the checker only
    from typing_extensions import Buffer

_FOOTER_METADATA_FIELD = 5  # Footer.metadata: repeated UserMetadataItem
_POSTSCRIPT_FOOTER_LENGTH_FIELD = 1  # PostScript.footerLength
_POSTSCRIPT_COMPRESSION_FIELD = 2  # PostScript.compression; 0 is NONE
_POSTSCRIPT_BLOCK_SIZE_FIELD = 3  # PostScript.compressionBlockSize
_DEFAULT_BLOCK_SIZE = 256 * 1024  # ORC's default when the PostScript names none
_VARINT, _LENGTH_DELIMITED = 0, 2


class HeldTail(io.RawIOBase):
    """A pass-through writer that, once `hold` is called, keeps what is written in memory: the
    bytes of the file's last stripe and tail, until `release` writes them, changed, to the file."""

    def __init__(self, file: BinaryIO):
        super().__init__()
        self.file = file
        self._held: io.BytesIO | None = None
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Buffer) -> int:
        size = len(memoryview(data))
        if self._held is not None:
            self._held.write(data)
        else:
            self.file.write(bytes(data))
        self._position += size
        return size

    def tell(self) -> int:
        return self._position

    def hold(self) -> None:
        self._held = io.BytesIO()

    def release(self, metadata: Mapping[bytes, bytes]) -> None:
        assert self._held is not None, "hold() first"
        held, self._held = self._held.getvalue(), None
        self.file.write(with_user_metadata(held, metadata) if metadata else held)

    def close(self) -> None:  # pyarrow closes what it wrote to; the file is the sink's to close
        super().close()


def with_user_metadata(tail: bytes, metadata: Mapping[bytes, bytes]) -> bytes:
    """`tail`, the end of an ORC file that holds at least its footer and PostScript, with
    `metadata` added to the footer's user metadata."""
    postscript_length = tail[-1]
    postscript = tail[-1 - postscript_length:-1]
    fields = dict(_varint_fields(postscript))
    footer_end = len(tail) - 1 - postscript_length
    added = b"".join(_field(_FOOTER_METADATA_FIELD, _field(1, key) + _field(2, value))
                     for key, value in sorted(metadata.items()))
    if fields.get(_POSTSCRIPT_COMPRESSION_FIELD, 0):
        added = _original_chunks(added, fields.get(_POSTSCRIPT_BLOCK_SIZE_FIELD, _DEFAULT_BLOCK_SIZE))
    new_postscript = _with_varint(postscript, _POSTSCRIPT_FOOTER_LENGTH_FIELD,
                                  fields[_POSTSCRIPT_FOOTER_LENGTH_FIELD] + len(added))
    if len(new_postscript) > 255:
        raise ValueError("the ORC PostScript would exceed 255 bytes")
    return tail[:footer_end] + added + new_postscript + bytes([len(new_postscript)])


def _original_chunks(data: bytes, block_size: int) -> bytes:
    """`data` as uncompressed chunks of a compressed stream: each a 3-byte little-endian header,
    length << 1 with the low bit set ("original"), then the bytes."""
    chunks = []
    for start in range(0, len(data), block_size):
        chunk = data[start:start + block_size]
        chunks.append(((len(chunk) << 1) | 1).to_bytes(3, "little") + chunk)
    return b"".join(chunks)


def _field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(value)) + value


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _fields(message: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of a protobuf message: its number, wire type, value (a varint's, or a length's),
    and where its bytes start and end."""
    at = 0
    while at < len(message):
        start = at
        key, at = _read_varint(message, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, at = _read_varint(message, at)
        elif wire_type == _LENGTH_DELIMITED:
            value, at = _read_varint(message, at)
            at += value
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type} in an ORC PostScript")
        yield number, wire_type, value, start, at


def _varint_fields(message: bytes) -> Iterator[tuple[int, int]]:
    return ((number, value) for number, wire_type, value, _, _ in _fields(message) if wire_type == _VARINT)


def _with_varint(message: bytes, number: int, value: int) -> bytes:
    """`message` with its varint field `number` set to `value`."""
    for field_number, wire_type, _, start, end in _fields(message):
        if field_number == number and wire_type == _VARINT:
            return message[:start] + _varint(number << 3 | _VARINT) + _varint(value) + message[end:]
    raise ValueError(f"the ORC PostScript has no field {number}")
