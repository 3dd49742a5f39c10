"""Decoding a request off the wire, naming the field that does not decode.

grpc answers a request its deserializer cannot parse with INTERNAL/UNKNOWN and no field. The
servicer decodes through `decode_request` instead: an undecodable request (a string that is not
UTF-8, a truncated or corrupt wire, a message nested past protobuf's recursion limit) becomes
`UndecodableRequest` carrying the offending field's path, e.g. ``dataset.inline.rows[0].prompt:
is not valid UTF-8``, which the server answers as INVALID_ARGUMENT. The path is found by walking
the wire format field by field; a Struct-valued field (free-form JSON) is blamed as a whole.
"""

from __future__ import annotations

from google.protobuf import message as pb_message
from google.protobuf.descriptor import FieldDescriptor

# Protobuf's own nesting limit (upb): a request nested deeper than this never decodes.
MAX_DEPTH = 100
FREE_FORM = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


class UndecodableRequest:
    """Stands in for a request that did not decode; `message` starts with the field path."""

    def __init__(self, message: str):
        self.message = message


def decode_request(message_class, raw: bytes):
    """`message_class.FromString(raw)`, or an UndecodableRequest naming the field."""
    try:
        return message_class.FromString(raw)
    except (pb_message.DecodeError, RecursionError, ValueError) as err:
        where, why = locate(message_class.DESCRIPTOR, raw, 0) or ("request", str(err) or "not valid protobuf")
        return UndecodableRequest(f"{where}: {why} (not a valid {message_class.DESCRIPTOR.full_name})")


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(raw) or shift > 63:
            raise ValueError("truncated varint")
        b = raw[i]
        value |= (b & 0x7F) << shift
        i += 1
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(raw: bytes):
    """(field number, wire type, payload bytes or None) of each top-level field; ValueError if torn."""
    i = 0
    while i < len(raw):
        key, i = _varint(raw, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(raw, i)
            yield number, wire, None
        elif wire == 1:
            i += 8
            yield number, wire, None
        elif wire == 5:
            i += 4
            yield number, wire, None
        elif wire == 2:
            n, i = _varint(raw, i)
            if i + n > len(raw):
                raise ValueError(f"field {number} runs past the end of the message")
            yield number, wire, raw[i:i + n]
            i += n
        else:
            raise ValueError(f"field {number} has an unknown wire type {wire}")
        if i > len(raw):
            raise ValueError(f"field {number} runs past the end of the message")


def locate(desc, raw: bytes, depth: int) -> tuple[str, str] | None:
    """(path, reason) of the first field of message `desc` in `raw` that does not decode."""
    counts: dict[int, int] = {}
    try:
        for number, wire, payload in _fields(raw):
            fd = desc.fields_by_number.get(number)
            index = counts.get(number, 0)
            counts[number] = index + 1
            if fd is None or payload is None or wire != 2:
                continue
            name = fd.name + (f"[{index}]" if fd.is_repeated else "")
            if fd.type == FieldDescriptor.TYPE_STRING:
                try:
                    payload.decode("utf-8")
                except UnicodeDecodeError as err:
                    return name, f"is not valid UTF-8 (byte {err.start})"
            elif fd.type == FieldDescriptor.TYPE_MESSAGE:
                sub = fd.message_type
                if sub.full_name in FREE_FORM or (sub.GetOptions().map_entry and depth > 0):
                    try:
                        _decode(sub, payload)
                    except (pb_message.DecodeError, RecursionError, ValueError):
                        return name, f"does not decode (nested past {MAX_DEPTH} levels, or corrupt)"
                    continue
                if depth >= MAX_DEPTH:
                    return name, f"is nested past {MAX_DEPTH} levels"
                found = locate(sub, payload, depth + 1)
                if found:
                    return (f"{name}.{found[0]}" if found[0] else name), found[1]
    except ValueError as err:
        return "request" if depth == 0 else "", f"corrupt wire format ({err})"
    return None


def _decode(desc, payload: bytes) -> None:
    from google.protobuf import message_factory

    message_factory.GetMessageClass(desc).FromString(payload)
