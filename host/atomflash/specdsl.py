"""A small vocabulary for defining binary formats once.

Everything that crosses a boundary in atomflash (host commands, completions,
OOB records, identify data, ...) is described with :class:`Record` and
:class:`DocEnum` in :mod:`atomflash.spec`.  From those descriptions:

* Python packs and unpacks bytes directly (this module),
* :mod:`atomflash.gen_c` writes the C header the firmware and test programs use,
* :mod:`rtl.spec` builds Amaranth ``data.StructLayout`` views for the RTL.

Rules that keep the three identical: fields are unsigned little-endian
integers of 1, 2, 4 or 8 bytes, each naturally aligned, laid out in order
with no implicit padding (reserved space is an explicit field).  Sub-byte
values live in :class:`Bits` inside an integer field, so C never needs a
bitfield (whose layout the C standard leaves to the compiler).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Iterable, Mapping

__all__ = ["Bits", "Field", "Record", "RecordValue", "DocEnum", "SpecError", "at", "reserved"]


class SpecError(ValueError):
    """A value does not fit the format it is being packed into."""


_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


@dataclass(frozen=True)
class Bits:
    """A named bit range ``[lsb, lsb + width)`` inside an integer field."""

    name: str
    lsb: int
    width: int
    doc: str

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    def take(self, word: int) -> int:
        """The value of these bits inside ``word``."""
        return (word >> self.lsb) & ((1 << self.width) - 1)

    def put(self, value: int) -> int:
        """``value`` placed at these bits (ValueError when it does not fit)."""
        if value >> self.width:
            raise ValueError(f"{self.name}={value} does not fit {self.width} bits")
        return value << self.lsb


@dataclass(frozen=True)
class Field:
    """One little-endian unsigned field of ``size`` bytes."""

    name: str
    size: int
    doc: str
    bits: tuple[Bits, ...] = ()
    offset: int = -1  # filled in by Record

    def __post_init__(self):
        if self.size not in _CODES:
            raise SpecError(f"field {self.name}: size {self.size} is not 1, 2, 4 or 8 bytes")
        used = 0
        for b in self.bits:
            if b.lsb < 0 or b.width <= 0 or b.lsb + b.width > 8 * self.size:
                raise SpecError(f"field {self.name}: bits {b.name} fall outside the field")
            if used & b.mask:
                raise SpecError(f"field {self.name}: bits {b.name} overlap another bit range")
            used |= b.mask

    @property
    def width(self) -> int:
        return 8 * self.size

    def compose(self, **bit_values: int) -> int:
        """The field's value from its named bit ranges (unnamed bits 0)."""
        by = {b.name: b for b in self.bits}
        value = 0
        for k, v in bit_values.items():
            if k not in by:
                raise SpecError(f"{self.name} has no bit range {k!r}")
            b, v = by[k], int(v)
            if v < 0 or v >> b.width:
                raise SpecError(f"{self.name}.{k}={v} does not fit {b.width} bits")
            value |= v << b.lsb
        return value

    def decompose(self, value: int) -> "RecordValue":
        """Each named bit range of the field's ``value``."""
        return RecordValue({b.name: (value >> b.lsb) & ((1 << b.width) - 1) for b in self.bits})

    @property
    def ctype(self) -> str:
        return f"uint{self.width}_t"


def u8(name, doc, bits=()):
    return Field(name, 1, doc, tuple(bits))


def u16(name, doc, bits=()):
    return Field(name, 2, doc, tuple(bits))


def u32(name, doc, bits=()):
    return Field(name, 4, doc, tuple(bits))


def u64(name, doc, bits=()):
    return Field(name, 8, doc, tuple(bits))


def reserved(start: int, end: int, prefix: str = "rsvd") -> list[Field]:
    """Reserved bytes ``[start, end)`` as naturally aligned fields, widest first (for formats another
    standard lays out, whose reserved spans fall anywhere)."""
    out = []
    while start < end:
        size = next(n for n in (8, 4, 2, 1) if start % n == 0 and start + n <= end)
        out.append(Field(f"{prefix}{start}", size, "reserved"))
        start += size
    return out


def at(size: int, placed: Iterable[tuple[int, Field]]) -> list[Field]:
    """Fields at the byte offsets a standard gives them (``(offset, field)`` in order), the gaps and the
    tail up to ``size`` filled with :func:`reserved`."""
    out, offset = [], 0
    for where, f in placed:
        if where < offset:
            raise SpecError(f"{f.name}: offset {where} overlaps the field before it")
        out += reserved(offset, where)
        out.append(f)
        offset = where + f.size
    return out + reserved(offset, size)


class RecordValue(dict):
    """An unpacked record: a dict whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Record:
    """A fixed-size binary record made of naturally aligned fields."""

    def __init__(self, name: str, doc: str, fields: Iterable[Field], size: int | None = None):
        self.name = name
        self.doc = doc
        placed = []
        offset = 0
        for f in fields:
            if offset % f.size:
                raise SpecError(f"{name}.{f.name}: offset {offset} is not aligned to its size {f.size}")
            placed.append(Field(f.name, f.size, f.doc, f.bits, offset))
            offset += f.size
        if size is not None and size != offset:
            raise SpecError(f"{name}: fields add up to {offset} bytes, the format says {size}")
        names = [f.name for f in placed]
        if len(set(names)) != len(names):
            raise SpecError(f"{name}: duplicate field names")
        self.fields: tuple[Field, ...] = tuple(placed)
        self.size = offset
        self._struct = struct.Struct("<" + "".join(_CODES[f.size] for f in placed))
        self._by_name = {f.name: f for f in placed}

    def __getitem__(self, name: str) -> Field:
        return self._by_name[name]

    def __iter__(self):
        return iter(self.fields)

    def __repr__(self):
        return f"<Record {self.name}: {self.size} bytes>"

    # -- values ---------------------------------------------------------------
    def compose(self, field_name: str, **bit_values: int) -> int:
        """Build an integer field's value from its named bit ranges."""
        try:
            return self._by_name[field_name].compose(**bit_values)
        except SpecError as e:
            raise SpecError(f"{self.name}.{e}") from None

    def decompose(self, field_name: str, value: int) -> RecordValue:
        return self._by_name[field_name].decompose(value)

    def pack(self, values: Mapping[str, int] | None = None, **kw: int) -> bytes:
        """Pack field values (missing fields are 0) into ``size`` bytes."""
        merged = dict(values or {}, **kw)
        unknown = set(merged) - set(self._by_name)
        if unknown:
            raise SpecError(f"{self.name} has no field(s) {sorted(unknown)}")
        out = []
        for f in self.fields:
            v = int(merged.get(f.name, 0))
            if v < 0 or v >> f.width:
                raise SpecError(f"{self.name}.{f.name}={v} does not fit {f.width} bits")
            out.append(v)
        return self._struct.pack(*out)

    def unpack(self, data: bytes | bytearray | memoryview) -> RecordValue:
        if len(data) != self.size:
            raise SpecError(f"{self.name} is {self.size} bytes, got {len(data)}")
        return RecordValue(zip((f.name for f in self.fields), self._struct.unpack(bytes(data))))


class DocEnum(enum.IntEnum):
    """An IntEnum whose members carry a one-line meaning: ``NAME = value, "doc"``."""

    def __new__(cls, value: int, doc: str = ""):
        obj = int.__new__(cls, value)
        obj._value_ = value
        obj.doc = doc
        return obj


@dataclass(frozen=True)
class Constant:
    """A named integer that crosses a boundary (a limit, a magic, a size)."""

    name: str
    value: int
    doc: str


@dataclass
class ConstantGroup:
    name: str
    doc: str
    items: list[Constant] = field(default_factory=list)

    def __getattr__(self, name):
        for c in self.items:
            if c.name == name:
                return c.value
        raise AttributeError(name)

    def as_dict(self) -> dict[str, int]:
        return {c.name: c.value for c in self.items}


@dataclass(frozen=True)
class Register:
    """One 32-bit register of a register map.

    ``access``: "ro" (read only), "rw" (read/write), "w1c" (write 1 to clear), "w1s" (write 1 to set),
    "wo" (write only: the write is an action, reads return 0).
    ``stride``/``count`` describe a per-queue (or per-anything) array: register
    ``i`` of the array sits at ``offset + i * stride``.
    """

    name: str
    offset: int
    access: str
    doc: str
    bits: tuple[Bits, ...] = ()
    count: int = 1
    stride: int = 0

    def __post_init__(self):
        if self.access not in ("ro", "rw", "w1c", "w1s", "wo"):
            raise SpecError(f"register {self.name}: access {self.access!r} is not ro, rw, w1c, w1s or wo")
        if self.offset % 4 or (self.count > 1 and self.stride % 4):
            raise SpecError(f"register {self.name}: offset/stride must be multiples of 4")
        Field(self.name, 4, self.doc, self.bits)  # validates the bit ranges

    def compose(self, **bit_values: int) -> int:
        """The register's value from its named bit ranges."""
        return Field(self.name, 4, self.doc, self.bits).compose(**bit_values)

    def decompose(self, value: int) -> "RecordValue":
        """Each named bit range of a value of the register."""
        return Field(self.name, 4, self.doc, self.bits).decompose(value)

    def address(self, index: int = 0) -> int:
        if not 0 <= index < self.count:
            raise SpecError(f"register {self.name} has {self.count} instance(s), not index {index}")
        return self.offset + index * self.stride


class RegisterMap:
    """A named set of 32-bit registers in one Wishbone window."""

    def __init__(self, name: str, doc: str, size: int, registers: Iterable[Register]):
        self.name = name
        self.doc = doc
        self.size = size
        self.registers = tuple(registers)
        seen = {}
        for r in self.registers:
            for i in range(r.count):
                a = r.address(i)
                if a >= size:
                    raise SpecError(f"{name}.{r.name}[{i}] at 0x{a:x} is outside the {size}-byte window")
                if a in seen:
                    raise SpecError(f"{name}.{r.name}[{i}] overlaps {seen[a]} at 0x{a:x}")
                seen[a] = r.name
        self._by_name = {r.name: r for r in self.registers}

    def __getitem__(self, name: str) -> Register:
        return self._by_name[name]

    def __iter__(self):
        return iter(self.registers)
