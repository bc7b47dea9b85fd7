"""Protocol buffers' wire format, enough to write TensorBoard's messages
without the protobuf package.

A message is the concatenation of its fields' encodings, each made by one
function here from the field's number and value. As protobuf does for proto3,
a field holding its default (0, empty) is left out, except a member of a
oneof, which is written whatever its value (``always=True``): that it is
there is what says which member is set.
"""

from __future__ import annotations

import struct

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    """``value`` in base 128, low groups first; a negative int64 as its two's
    complement, ten bytes long."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def integer(field: int, value: int, always: bool = False) -> bytes:
    """An int32, int64, bool or enum field."""
    if not value and not always:
        return b""
    return _key(field, VARINT) + varint(int(value))


def double(field: int, value: float, always: bool = False) -> bytes:
    if not value and not always:
        return b""
    return _key(field, FIXED64) + struct.pack("<d", value)


def float32(field: int, value: float, always: bool = False) -> bytes:
    if not value and not always:
        return b""
    return _key(field, FIXED32) + struct.pack("<f", value)


def data(field: int, value: bytes, always: bool = False) -> bytes:
    """A bytes field, or an embedded message already encoded."""
    if not value and not always:
        return b""
    return _key(field, LENGTH_DELIMITED) + varint(len(value)) + value


def string(field: int, value: str, always: bool = False) -> bytes:
    return data(field, value.encode("utf-8"), always)


def packed_doubles(field: int, values) -> bytes:
    return data(field, struct.pack(f"<{len(values)}d", *values))


def packed_floats(field: int, values) -> bytes:
    return data(field, struct.pack(f"<{len(values)}f", *values))


def packed_integers(field: int, values) -> bytes:
    return data(field, b"".join(varint(int(v)) for v in values))


def repeated(field: int, encoded_items) -> bytes:
    """A repeated message or bytes field: one entry per item, empty ones too."""
    return b"".join(data(field, item, always=True) for item in encoded_items)
