"""OOB record packer: the spec's OOB record in, its bytes with CRC out.

Every page the log writer programs carries an OOB record (``atomflash.spec.OOB``)
in its spare area.  The record's CRC is what lets recovery tell a complete
record from a torn or erased one, so the gateware must compute it exactly as
the host, the firmware and the reference model do: the layout comes from
:mod:`rtl.spec` and the CRC from ``amaranth.lib.crc`` with the spec's
parameters.  Bytes leave little-endian, CRC last, one per cycle.
"""

from amaranth import Module, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl import spec as layouts

BYTE_STREAM = data.StructLayout({"data": 8, "last": 1})


class OOBPacker(wiring.Component):
    """Serialise OOB records to bytes, computing the CRC field.

    Ports
    -----
    record : In(stream.Signature(layouts.OOB))
        A record to pack; its ``crc`` field is ignored.  Accepted only when the
        previous record has left completely.
    bytes : Out(stream.Signature(BYTE_STREAM))
        ``spec.OOB.size`` bytes per record, little-endian, ``last`` on the final
        CRC byte.
    """

    record: In(stream.Signature(layouts.OOB))
    bytes: Out(stream.Signature(BYTE_STREAM))

    def elaborate(self, platform):
        m = Module()
        size = spec.OOB.size
        span = spec.OOB_CRC_SPAN

        m.submodules.crc = crc_proc = layouts.OOB_CRC(data_width=8).create()

        held = Signal(8 * size)
        index = Signal(range(size + 1))
        busy = Signal()

        byte_of_record = held.word_select(index[:6], 8)
        crc_bytes = crc_proc.crc.word_select((index - span)[:2], 8)
        m.d.comb += [
            self.record.ready.eq(~busy),
            self.bytes.valid.eq(busy),
            self.bytes.payload.data.eq(byte_of_record),
            self.bytes.payload.last.eq(index == size - 1),
            crc_proc.data.eq(byte_of_record),
            crc_proc.valid.eq(self.bytes.valid & self.bytes.ready & (index < span)),
        ]
        with m.If(index >= span):
            m.d.comb += self.bytes.payload.data.eq(crc_bytes)

        with m.If(self.record.valid & self.record.ready):
            m.d.sync += [held.eq(self.record.payload.as_value()), index.eq(0), busy.eq(1)]
            m.d.comb += crc_proc.start.eq(1)
        with m.If(self.bytes.valid & self.bytes.ready):
            m.d.sync += index.eq(index + 1)
            with m.If(index == size - 1):
                m.d.sync += busy.eq(0)
        return m
