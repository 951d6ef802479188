"""Amaranth views of :mod:`atomflash.spec`.

Each spec :class:`~atomflash.specdsl.Record` becomes a ``data.StructLayout``
whose bit ``8*offset + i`` is bit ``i`` of the field at byte ``offset``.  Read
as a little-endian integer, a record's bytes are therefore exactly the layout's
value, so ``Signal(layouts.OOB)`` and ``spec.OOB.pack(...)`` agree by
construction.  Fields with named bit ranges become nested layouts.
"""

from __future__ import annotations

from amaranth.lib import crc, data

from atomflash import spec
from atomflash.specdsl import Field, Record


def _field_shape(f: Field):
    if not f.bits:
        return f.width
    members = {}
    pos = 0
    for b in sorted(f.bits, key=lambda b: b.lsb):
        if b.lsb > pos:
            members[f"_pad{pos}"] = b.lsb - pos
        members[b.name] = b.width
        pos = b.lsb + b.width
    if pos < f.width:
        members[f"_pad{pos}"] = f.width - pos
    return data.StructLayout(members)


def layout_of(rec: Record) -> data.StructLayout:
    """The ``StructLayout`` whose value is ``rec``'s bytes read little-endian."""
    layout = data.StructLayout({f.name: _field_shape(f) for f in rec.fields})
    assert layout.size == 8 * rec.size
    return layout


def crc_algorithm(params: spec.CrcParams) -> crc.Algorithm:
    return crc.Algorithm(crc_width=params.width, polynomial=params.polynomial,
                         initial_crc=params.initial_crc, reflect_input=params.reflect_input,
                         reflect_output=params.reflect_output, xor_output=params.xor_output)


CMD = layout_of(spec.CMD)
CPL = layout_of(spec.CPL)
ATOMIC_ENTRY = layout_of(spec.ATOMIC_ENTRY)
REMAP_ENTRY = layout_of(spec.REMAP_ENTRY)
OOB = layout_of(spec.OOB)
IDENTIFY = layout_of(spec.IDENTIFY)

OOB_CRC = crc_algorithm(spec.OOB_CRC)

# Every other spec record too, by its upper-case name (rtl.spec.PPA, ...).
for _record in spec.RECORDS:
    globals().setdefault(_record.name.upper(), layout_of(_record))
del _record

NAND_DESC = layout_of(spec.NAND_DESC)
NAND_CPL = layout_of(spec.NAND_CPL)
NAND_CRC = crc_algorithm(spec.NAND_CRC)


def hw_enum(spec_enum, shape: int):
    """An ``amaranth.lib.enum.Enum`` with ``spec_enum``'s members (a spec
    ``DocEnum``), so RTL and firmware share one definition of the values."""
    from amaranth.lib import enum

    namespace = enum.EnumMeta.__prepare__(spec_enum.__name__, (enum.Enum,), shape=shape)
    for member in spec_enum:
        namespace[member.name] = int(member)
    namespace["__doc__"] = spec_enum.__doc__
    return enum.EnumMeta(spec_enum.__name__, (enum.Enum,), namespace, shape=shape)

SATA_CRC = crc_algorithm(spec.SATA_CRC)
