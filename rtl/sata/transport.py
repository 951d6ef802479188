"""SATA transport layer, device role: FISes between the link layer and the ATA command layer.

A SATA device talks to its host in Frame Information Structures (FIS).  The link layer
(``rtl/sata/link.py``) frames them: it adds and checks the CRC, scrambles, and hands this layer
one FIS per frame as 32-bit dwords (``rx``, ``last`` on the final dword, ``error`` there when the
CRC was bad), and sends one FIS per frame that this layer offers on ``tx``, answering each with
``tx_status`` (``ok`` when the host said R_OK; 0 on R_ERR or when the link went down).  A FIS's
first dword names its type in bits 7:0; the layouts are ``spec.SATA_FIS_*``.

What comes in (``rx``), one frame at a time:

* **Register H2D** (27h, 5 dwords): decoded into an ATA command (``ATA_COMMAND``: C bit, command,
  features 15:0, LBA 47:0, count, device, control) and offered on ``command`` from a slot of its own.
  While the slot holds a command nobody took yet, the frames behind it still come in: a Data FIS
  the command layer asked for passes the waiting command (with NCQ the host may queue a new
  command just before the Data FIS of one in progress), and so is anything dropped.  Only a second
  Register H2D waits, the link held (``rx.ready`` low: the link sends HOLD) at its first dword,
  until the slot is free.
* **Data** (46h): the write data of a DMA write.  Only while the command layer asks for one
  (``data_wanted``) are its data dwords passed on ``data_in``, flow-controlled through, ``last`` on
  the final dword and ``error`` there when the CRC was bad (the command layer has already stored
  the dwords and must throw the transfer away: the device reports ICRC).
* Anything else is dropped whole and counted, and changes nothing: a frame whose CRC failed
  (``crc_errors``); an unknown or device-to-host type, a Register H2D of the wrong length, a Data
  FIS with no data or one nobody asked for (``malformed``).

What goes out (``send``, one request at a time, answered on ``sent``): Register D2H, DMA Activate,
PIO Setup, Set Device Bits, DMA Setup and Data, each built from the request's register values in
its ``spec`` layout.  A Data FIS's dwords follow its header from ``data_out`` (up to ``last``).
The host may answer a frame with R_ERR.  SATA lets a transport send a non-Data FIS again; this one
does, up to ``retries`` more times, and a Data FIS never (its dwords are gone): ``sent.ok`` is 0
then and the command layer reports the failed transfer.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import SataFisType
from rtl import spec as layouts

__all__ = ["SataTransport", "ATA_COMMAND", "SEND", "LINK_TX", "LINK_TX_STATUS", "LINK_RX"]

LINK_TX = data.StructLayout({"data": 32, "last": 1})
LINK_TX_STATUS = data.StructLayout({"ok": 1})
LINK_RX = data.StructLayout({"data": 32, "last": 1, "error": 1})

#: a Register H2D FIS, decoded
ATA_COMMAND = data.StructLayout({"c": 1, "command": 8, "features": 16, "lba": 48, "count": 16,
                                 "device": 8, "control": 8})

#: a FIS to send: its type and the register values its layout takes (the rest ignored)
SEND = data.StructLayout({"type": 8, "interrupt": 1, "to_host": 1, "status": 8, "error": 8, "lba": 48,
                          "device": 8, "count": 16, "e_status": 8, "transfer_count": 32, "sactive": 32,
                          "buffer_id": 32})

H2D = spec.SATA_FIS_REG_H2D
H2D_DWORDS = H2D.size // 4
SENT_TYPES = {SataFisType.REG_D2H: spec.SATA_FIS_REG_D2H, SataFisType.DMA_ACTIVATE: spec.SATA_FIS_DMA_ACTIVATE,
              SataFisType.PIO_SETUP: spec.SATA_FIS_PIO_SETUP, SataFisType.SET_DEVICE_BITS: spec.SATA_FIS_SET_DEVICE_BITS,
              SataFisType.DMA_SETUP: spec.SATA_FIS_DMA_SETUP, SataFisType.DATA: spec.SATA_FIS_DATA_HEADER}
MAX_HEADER_DWORDS = max(r.size for r in SENT_TYPES.values()) // 4


def _lba_bytes(view, lba):
    return [view[f"lba{i}"].eq(lba[8 * i:8 * i + 8]) for i in range(6)]


class SataTransport(wiring.Component):
    """See the module docstring.

    Ports
    -----
    tx : Out(stream LINK_TX), tx_status : In(stream LINK_TX_STATUS), rx : In(stream LINK_RX), link_up : In(1)
        The link layer's ports.
    command : Out(stream ATA_COMMAND)
        Register H2D FISes.
    data_in : Out(stream {data, last, error}), data_wanted : In(1)
        Data FIS payloads, while ``data_wanted``.
    send : In(stream SEND), data_out : In(stream {data, last}), sent : Out(stream {ok})
        FISes to send, a Data FIS's dwords, and each one's outcome.
    malformed, crc_errors : Out(16)
        Frames dropped.
    """

    def __init__(self, *, retries: int = 3):
        self.retries = retries
        super().__init__({
            "tx": Out(stream.Signature(LINK_TX)),
            "tx_status": In(stream.Signature(LINK_TX_STATUS)),
            "rx": In(stream.Signature(LINK_RX)),
            "link_up": In(1),
            "command": Out(stream.Signature(ATA_COMMAND)),
            "data_in": Out(stream.Signature(LINK_RX)),
            "data_wanted": In(1),
            "send": In(stream.Signature(SEND)),
            "data_out": In(stream.Signature(LINK_TX)),
            "sent": Out(stream.Signature(LINK_TX_STATUS)),
            "malformed": Out(16),
            "crc_errors": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.receive = self._receive()
        m.submodules.transmit = self._transmit()
        return m

    # -- receive -----------------------------------------------------------------------------------------
    def _receive(self):
        m = Module()
        rx = self.rx
        word, last, error = rx.payload.data, rx.payload.last, rx.payload.error
        fis = Signal(layouts.SATA_FIS_REG_H2D)
        count = Signal(range(H2D_DWORDS + 1))
        raw = fis.as_value()

        def drop_counted(bad_crc):
            with m.If(bad_crc):
                m.d.sync += self.crc_errors.eq(self.crc_errors + 1)
            with m.Else():
                m.d.sync += self.malformed.eq(self.malformed + 1)

        cmd = self.command.payload
        m.d.comb += [cmd.c.eq(fis.flags.c), cmd.command.eq(fis.command),
                     cmd.features.eq(Cat(fis.features, fis.features_exp)),
                     cmd.lba.eq(Cat(*(fis[f"lba{i}"] for i in range(6)))),
                     cmd.count.eq(fis.count), cmd.device.eq(fis.device), cmd.control.eq(fis.control)]

        held = Signal()         # the slot: ``fis`` is a whole Register H2D nobody took yet
        m.d.comb += self.command.valid.eq(held)
        with m.If(self.command.valid & self.command.ready):
            m.d.sync += held.eq(0)
        register_waits = held & (word[:8] == SataFisType.REG_H2D)

        with m.FSM():
            with m.State("FIRST"):
                m.d.comb += rx.ready.eq(~register_waits)
                with m.If(rx.valid & ~register_waits):
                    m.d.sync += count.eq(1)
                    with m.If(~held):
                        m.d.sync += raw[:32].eq(word)
                    with m.If(last):
                        drop_counted(error)         # no FIS is one dword long but DMA Activate, ours to send
                    with m.Elif(word[:8] == SataFisType.REG_H2D):
                        m.next = "REGISTER"
                    with m.Elif((word[:8] == SataFisType.DATA) & self.data_wanted):
                        m.next = "DATA"
                    with m.Else():
                        m.next = "DROP"
            with m.State("REGISTER"):
                m.d.comb += rx.ready.eq(1)
                with m.If(rx.valid):
                    with m.If(count < H2D_DWORDS):
                        m.d.sync += raw.word_select(count, 32).eq(word)
                    m.d.sync += count.eq(count + 1)
                    with m.If(last):
                        with m.If(~error & (count == H2D_DWORDS - 1)):
                            m.d.sync += held.eq(1)
                        with m.Else():
                            drop_counted(error)
                        m.next = "FIRST"
            with m.State("DATA"):
                m.d.comb += [self.data_in.valid.eq(rx.valid), self.data_in.payload.eq(rx.payload),
                             rx.ready.eq(self.data_in.ready)]
                with m.If(rx.valid & rx.ready & last):
                    with m.If(error):
                        m.d.sync += self.crc_errors.eq(self.crc_errors + 1)
                    m.next = "FIRST"
            with m.State("DROP"):
                m.d.comb += rx.ready.eq(1)
                with m.If(rx.valid & last):
                    drop_counted(error)
                    m.next = "FIRST"
        return m

    # -- transmit ----------------------------------------------------------------------------------------
    def _transmit(self):
        m = Module()
        header = Signal(32 * MAX_HEADER_DWORDS)
        length = Signal(range(MAX_HEADER_DWORDS + 1))
        index = Signal(range(MAX_HEADER_DWORDS + 1))
        tries = Signal(range(self.retries + 2))
        is_data = Signal()
        ok = Signal()

        # each type's header from the request, in its spec layout
        r = self.send.payload
        built = Signal.like(header)
        built_length = Signal.like(length)
        with m.Switch(r.type):
            for fis_type, record in SENT_TYPES.items():
                with m.Case(int(fis_type)):
                    view = Signal(layouts.layout_of(record), name=f"fis_{record.name}")
                    m.d.comb += [view.type.eq(int(fis_type)), built.eq(view.as_value()),
                                 built_length.eq(record.size // 4)]
                    fields = {f.name for f in record.fields}
                    sdb = record is spec.SATA_FIS_SET_DEVICE_BITS       # its status splits in two
                    for name in ("status", "error", "device", "count", "e_status", "transfer_count", "sactive"):
                        if name in fields and not (sdb and name == "status"):
                            m.d.comb += view[name].eq(r[name])
                    if "lba0" in fields:
                        m.d.comb += _lba_bytes(view, r.lba)
                    if sdb:
                        m.d.comb += [view.status.lo.eq(r.status[0:3]), view.status.hi.eq(r.status[4:7])]
                    if record is spec.SATA_FIS_DMA_SETUP:
                        m.d.comb += view.buffer_id_lo.eq(r.buffer_id)
                    bits = {b.name for b in record["flags"].bits}
                    if "i" in bits:
                        m.d.comb += view.flags.i.eq(r.interrupt)
                    if "d" in bits:
                        m.d.comb += view.flags.d.eq(r.to_host)

        tx = self.tx
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.send.ready.eq(1)
                with m.If(self.send.valid):
                    m.d.sync += [header.eq(built), length.eq(built_length), index.eq(0), tries.eq(0),
                                 is_data.eq(r.type == SataFisType.DATA)]
                    m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += [tx.valid.eq(1), tx.payload.data.eq(header.word_select(index, 32)),
                             tx.payload.last.eq(~is_data & (index == length - 1))]
                with m.If(tx.ready):
                    m.d.sync += index.eq(index + 1)
                    with m.If(is_data):
                        m.next = "DATA"
                    with m.Elif(index == length - 1):
                        m.next = "STATUS"
            with m.State("DATA"):
                m.d.comb += [tx.valid.eq(self.data_out.valid), tx.payload.eq(self.data_out.payload),
                             self.data_out.ready.eq(tx.ready)]
                with m.If(self.data_out.valid & tx.ready & self.data_out.payload.last):
                    m.next = "STATUS"
            with m.State("STATUS"):
                m.d.comb += self.tx_status.ready.eq(1)
                with m.If(self.tx_status.valid):
                    with m.If(self.tx_status.payload.ok | is_data | (tries == self.retries) | ~self.link_up):
                        m.d.sync += ok.eq(self.tx_status.payload.ok)
                        m.next = "REPORT"
                    with m.Else():
                        m.d.sync += [tries.eq(tries + 1), index.eq(0)]
                        m.next = "HEADER"
            with m.State("REPORT"):
                m.d.comb += [self.sent.valid.eq(1), self.sent.payload.ok.eq(ok)]
                with m.If(self.sent.ready):
                    m.next = "IDLE"
        return m
