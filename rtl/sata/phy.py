"""SATA PHY control, device role, at a transceiver's parallel boundary.

A SATA link starts with out-of-band (OOB) signalling: bursts of ALIGNs
separated by electrical idle, which a transceiver's OOB detectors report as
strobes.  The host starts, the device answers, and both then align:

====  ======================================  ===================================
step  host                                    device (this module)
====  ======================================  ===================================
1     COMRESET (``tx_cominit_stb``)           sees ``rx_cominit_stb`` rise, fall
2                                             COMINIT (``tx_cominit_stb``)
3     sees COMINIT; COMWAKE                   sees ``rx_comwake_stb`` rise, fall
4                                             COMWAKE (``tx_comwake_stb``)
5     sends D10.2 until it sees ALIGN         sends ALIGN until it sees ALIGN
6     sends ALIGN, waits for three            sees ALIGN: link up, sends what
      non-ALIGN primitives                    the link layer sends (SYNC)
====  ======================================  ===================================

A COMRESET seen at any time (the host retrying, or resetting the link) starts
over at step 2; so does a line that stays electrically idle for
``quiet_cycles`` once up (cable pulled, host gone): then the device waits
for the next COMRESET.  An OOB step that is not answered within
``oob_timeout`` cycles also returns to waiting for COMRESET (the host's own
retry timer sends the next one).

Once up, the PHY carries the link layer's dwords ({data, charisk}) one per
clock.  On transmit it inserts ``ALIGNS_PER_PERIOD`` ALIGNs at the start of
every ``ALIGN_PERIOD`` dwords (the far receiver's elastic buffer drops or
repeats them to absorb clock differences; a host also takes a long absence
of ALIGNs as a dead line), holding the link layer off with ``tx.ready``.  On
receive it drops every ALIGN, wherever it falls (inside a frame, between a
CONT and its junk), so the link layer never sees one.

The transceiver boundary is the one LiteSATA's PHY controller and datapath
use toward their transceivers (litesata/phy/ctrl.py, datapath.py,
a7sataphy.py): 32-bit data with a 4-bit charisk each way, ``tx_idle``
(electrical idle), the COMINIT/COMWAKE transmit strobes with their
acknowledges and the receive detectors, ``rx_idle`` and ``ready``.  The
device's COMRESET detector is the transceiver's COMINIT detector (the two
signals are the same bursts), so the names are LiteSATA's.  Polarity, CDR
hold and resets stay with the transceiver wrapper, which a board adds.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash.spec import SATA_LINK, SATA_PRIMITIVE_CHARISK, SataPrimitive

# One dword on the line: four 8b/10b characters, charisk bit i set when byte i is a K character.
LINE_WORD = data.StructLayout({"data": 32, "charisk": 4})


class TransceiverSignature(wiring.Signature):
    """The parallel side of a SATA transceiver, as the PHY controller drives it (LiteSATA's names)."""

    def __init__(self):
        super().__init__({
            "ready": In(1),            # transceiver initialised
            "tx_data": Out(32),
            "tx_charisk": Out(4),
            "tx_idle": Out(1),         # electrical idle on the line
            "tx_cominit_stb": Out(1),  # send a COMINIT (a host: COMRESET) burst sequence ...
            "tx_cominit_ack": In(1),   # ... sent
            "tx_comwake_stb": Out(1),
            "tx_comwake_ack": In(1),
            "rx_data": In(32),
            "rx_charisk": In(4),
            "rx_idle": In(1),          # the line is electrically idle
            "rx_cominit_stb": In(1),   # COMINIT/COMRESET bursts being detected
            "rx_comwake_stb": In(1),
        })


def is_primitive(word, primitive: SataPrimitive):
    """``word`` (a LINE_WORD view) is ``primitive``."""
    return (word.charisk == SATA_PRIMITIVE_CHARISK) & (word.data == int(primitive))


class SataDevicePhy(wiring.Component):
    """Device-side OOB, ALIGN insertion and removal; see the module's essay.

    ``tx``: the link layer's dwords, taken while ``link_up`` and no ALIGN is
    being inserted.  ``rx``: received dwords without ALIGNs, while ``link_up``.
    """

    def __init__(self, *, oob_timeout: int = 2000, quiet_cycles: int = 64):
        self._oob_timeout = oob_timeout
        self._quiet_cycles = quiet_cycles
        super().__init__({
            "trx": Out(TransceiverSignature()),
            "tx": In(stream.Signature(LINE_WORD)),
            "rx": Out(stream.Signature(LINE_WORD, always_ready=True)),
            "link_up": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        trx = self.trx
        rx_word = Signal(LINE_WORD)
        m.d.comb += [rx_word.data.eq(trx.rx_data), rx_word.charisk.eq(trx.rx_charisk)]
        rx_align = is_primitive(rx_word, SataPrimitive.ALIGN)

        timer = Signal(range(max(self._oob_timeout, self._quiet_cycles) + 1))
        quiet = Signal(range(self._quiet_cycles + 1))
        m.d.sync += timer.eq(timer + 1)

        # transmit: ALIGN_PERIOD-dword periods, each starting with ALIGNS_PER_PERIOD ALIGNs
        period = Signal(range(SATA_LINK.ALIGN_PERIOD))
        inserting = period < SATA_LINK.ALIGNS_PER_PERIOD

        def send(word_data, charisk):
            m.d.comb += [trx.tx_data.eq(word_data), trx.tx_charisk.eq(charisk)]

        with m.FSM(name="oob"):
            with m.State("AWAIT-COMRESET"):
                m.d.comb += trx.tx_idle.eq(1)
                with m.If(trx.ready & trx.rx_cominit_stb):
                    m.next = "AWAIT-COMRESET-END"
            with m.State("AWAIT-COMRESET-END"):
                m.d.comb += trx.tx_idle.eq(1)
                with m.If(~trx.rx_cominit_stb):
                    m.next = "COMINIT"
            with m.State("COMINIT"):
                m.d.comb += [trx.tx_idle.eq(1), trx.tx_cominit_stb.eq(1)]
                m.d.sync += timer.eq(0)
                with m.If(trx.tx_cominit_ack):
                    m.next = "AWAIT-COMWAKE"
            with m.State("AWAIT-COMWAKE"):
                m.d.comb += trx.tx_idle.eq(1)
                with m.If(trx.rx_cominit_stb):
                    m.next = "AWAIT-COMRESET-END"
                with m.Elif(trx.rx_comwake_stb):
                    m.next = "AWAIT-COMWAKE-END"
                with m.Elif(timer == self._oob_timeout):
                    m.next = "AWAIT-COMRESET"
            with m.State("AWAIT-COMWAKE-END"):
                m.d.comb += trx.tx_idle.eq(1)
                with m.If(~trx.rx_comwake_stb):
                    m.next = "COMWAKE"
            with m.State("COMWAKE"):
                m.d.comb += [trx.tx_idle.eq(1), trx.tx_comwake_stb.eq(1)]
                m.d.sync += timer.eq(0)
                with m.If(trx.tx_comwake_ack):
                    m.next = "SEND-ALIGN"
            with m.State("SEND-ALIGN"):
                send(int(SataPrimitive.ALIGN), SATA_PRIMITIVE_CHARISK)
                m.d.sync += [period.eq(0), quiet.eq(0)]
                with m.If(trx.rx_cominit_stb):
                    m.next = "AWAIT-COMRESET-END"
                with m.Elif(~trx.rx_idle & rx_align):
                    m.next = "READY"
                with m.Elif(timer == self._oob_timeout):
                    m.next = "AWAIT-COMRESET"
            with m.State("READY"):
                m.d.comb += self.link_up.eq(1)
                m.d.sync += period.eq(period + 1)
                with m.If(inserting):
                    send(int(SataPrimitive.ALIGN), SATA_PRIMITIVE_CHARISK)
                with m.Else():
                    send(self.tx.payload.data, self.tx.payload.charisk)
                    m.d.comb += self.tx.ready.eq(1)
                m.d.comb += [self.rx.payload.eq(rx_word),
                             self.rx.valid.eq(~trx.rx_idle & ~rx_align)]
                m.d.sync += quiet.eq(0)
                with m.If(trx.rx_idle):
                    m.d.sync += quiet.eq(quiet + 1)
                with m.If(trx.rx_cominit_stb):
                    m.next = "AWAIT-COMRESET-END"
                with m.Elif(quiet == self._quiet_cycles):
                    m.next = "AWAIT-COMRESET"
        return m
