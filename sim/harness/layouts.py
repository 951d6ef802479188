"""Stream payloads as Python dicts: pack/unpack an Amaranth layout to and
from the integer a cocotb handle carries, so tests never hard-code bit offsets."""

from amaranth.lib import data

__all__ = ["pack", "unpack"]


def _layout(shape):
    return shape if isinstance(shape, data.Layout) else None


def pack(layout: data.Layout, fields: dict | None = None, **kw) -> int:
    """The integer value of ``layout`` with ``fields`` (nested layouts as dicts; missing fields 0)."""
    fields = dict(fields or {}, **kw)
    value = 0
    for name, field in layout:
        if name not in fields:
            continue
        v = fields.pop(name)
        inner = _layout(field.shape)
        if inner is not None and isinstance(v, dict):
            v = pack(inner, v)
        width = data.Layout.cast(field.shape).size if inner is not None else field.width
        value |= (int(v) & ((1 << width) - 1)) << field.offset
    if fields:
        raise KeyError(f"not in the layout: {sorted(fields)}")
    return value


def unpack(layout: data.Layout, value: int, raw: tuple = ()) -> dict:
    """``layout``'s fields of the integer ``value`` (nested layouts as dicts,
    but those named in ``raw`` as plain integers)."""
    value = int(value)
    out = {}
    for name, field in layout:
        inner = _layout(field.shape)
        width = data.Layout.cast(field.shape).size if inner is not None else field.width
        bits = (value >> field.offset) & ((1 << width) - 1)
        out[name] = unpack(inner, bits) if inner is not None and name not in raw else bits
    return out
