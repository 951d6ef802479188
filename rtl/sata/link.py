"""SATA link layer, device role: frames (FISes) over a stream of primitives.

The link sends one dword per clock to the PHY (rtl/sata/phy.py), which adds
ALIGNs on the way out and drops them on the way in, so here the line is a
stream of *primitives* (a K28.3/K28.5 byte and three data bytes,
:class:`~atomflash.spec.SataPrimitive`) and *data dwords*.  SATA's link is
half duplex for frames: one side transmits a frame while the other answers
with receiver primitives on the back channel.

Transmitting a frame (the transport layer offers it on ``tx``)::

    device  SYNC.. X_RDY.. SOF  d0 d1 HOLD.. d2 .. CRC EOF WTRM..      SYNC
    host    SYNC..   R_RDY..    R_IP..  HOLDA..   R_IP..    R_OK/R_ERR..

The data dwords and the CRC are scrambled (xor with the LFSR of
``SATA_LINK.SCRAMBLER_*``, restarted at every SOF); the CRC (``SATA_CRC``)
covers the FIS dwords.  ``tx.valid`` low mid-frame sends HOLD in place of
data; a HOLD from the receiver is answered with HOLDA and no data until it
stops.  The receiver's R_OK or R_ERR ends the frame and becomes the frame's
``tx_status`` (ok = 1 on R_OK); a SYNC from the host mid-frame (it aborted)
or the link going down ends it with ok = 0, the rest of the FIS being
drained from ``tx`` so the transport's stream stays framed.

Receiving a frame: X_RDY is answered with R_RDY, SOF starts the descrambler
and the CRC, data dwords are descrambled, checked and queued in a FIFO with
the last two held back (at EOF the newest is the CRC, dropped, and the one
before is the FIS's last dword, flagged ``error`` when the CRC does not
leave the register at zero or the FIFO overflowed).  R_IP goes back while
receiving, HOLD when the FIFO fills past ``hold_level`` (``rx.ready`` low
fills it), HOLDA while the host sends HOLD.  After EOF the answer is R_OK
or R_ERR until the host returns to SYNC.

Collisions: when both sides send X_RDY the SATA link state machines give
the device precedence: the host backs off to receive (LiteSATA's host link
does exactly that), the device keeps sending X_RDY and waits for R_RDY.  A
device that backed off too would leave both sides answering R_RDY forever.

CONT: a primitive sent ``CONT_AFTER`` times in a row is followed by CONT and
then scrambled junk dwords (from a free-running LFSR of the same
polynomial) until the primitive changes -- the EMI rule of the standard.
The run is restarted (the primitive sent again, then CONT) every
``junk_run`` dwords, so a receiver that started listening mid-run (a host
whose link layer comes up after its PHY's stability wait) learns the
primitive.  Data never follows junk directly: the repeated primitive is
sent once more first (else a receiver would take the data for junk).  On
receive, CONT repeats the last primitive and data dwords after it are
junk until the next primitive.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash.spec import SATA_LINK, SATA_PRIMITIVE_CHARISK, SataPrimitive
from rtl import spec as hw

from .phy import LINE_WORD, SataDevicePhy

TX_WORD = data.StructLayout({"data": 32, "last": 1})
TX_STATUS = data.StructLayout({"ok": 1})
RX_WORD = data.StructLayout({"data": 32, "last": 1, "error": 1})

_SCRAMBLER_TAPS = [i for i in range(16) if (SATA_LINK.SCRAMBLER_POLY >> i) & 1]


def _scrambler_matrix():
    """For one dword: which state bits each mask bit and each next-state bit is the xor of (as
    16-bit masks), from 32 steps of the Galois LFSR, each output bit the register's bit 15."""
    bits = [1 << i for i in range(16)]
    out = []
    for _ in range(32):
        msb = bits[15]
        out.append(msb)
        bits = [0] + bits[:15]
        for t in _SCRAMBLER_TAPS:
            bits[t] ^= msb
    return out, bits


_MASK_ROWS, _NEXT_ROWS = _scrambler_matrix()


def scrambler_dword(state):
    """(mask, next state) of the SATA scrambler for one dword from 16-bit ``state`` (an int, or an
    Amaranth value: then each bit is one xor of state bits)."""
    def apply(rows):
        if isinstance(state, int):
            return sum((bin(state & r).count("1") & 1) << i for i, r in enumerate(rows))
        return Cat(*[_xor_of(state, r) for r in rows])
    return apply(_MASK_ROWS), apply(_NEXT_ROWS)


def _xor_of(state, row):
    terms = [state[i] for i in range(16) if (row >> i) & 1]
    value = terms[0]
    for t in terms[1:]:
        value = value ^ t
    return value


def scrambler_masks(count: int, state: int = SATA_LINK.SCRAMBLER_SEED) -> list[int]:
    """The first ``count`` dword masks after SOF (the reference model of the RTL's scrambler)."""
    masks = []
    for _ in range(count):
        mask, state = scrambler_dword(state)
        masks.append(mask)
    return masks


class SataLink(wiring.Component):
    """The device's link layer; see the module's essay.

    ``phy_tx``/``phy_rx``/``phy_link_up`` face :class:`~rtl.sata.phy.SataDevicePhy`
    (``phy_tx.valid`` is always 1: the line never waits); the rest faces the transport layer.
    """

    def __init__(self, *, rx_depth: int = 64, hold_level: int = 16, junk_run: int = 64):
        assert 0 < hold_level < rx_depth
        self._rx_depth, self._hold_level, self._junk_run = rx_depth, hold_level, junk_run
        super().__init__({
            "tx": In(stream.Signature(TX_WORD)),
            "tx_status": Out(stream.Signature(TX_STATUS)),
            "rx": Out(stream.Signature(RX_WORD)),
            "link_up": Out(1),
            "phy_tx": Out(stream.Signature(LINE_WORD)),
            "phy_rx": In(stream.Signature(LINE_WORD, always_ready=True)),
            "phy_link_up": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        up = self.phy_link_up
        m.d.comb += self.link_up.eq(up)

        # -- receive: primitives (CONT expanded) and data dwords --------------------------------
        word = self.phy_rx.payload
        is_k = self.phy_rx.valid & (word.charisk == SATA_PRIMITIVE_CHARISK)
        is_d = self.phy_rx.valid & (word.charisk == 0)
        in_cont = Signal()
        last_rx_prim = Signal(32)
        rx_prim_valid = Signal()
        rx_prim = Signal(32)
        rx_data_valid = Signal()
        with m.If(~up):
            m.d.sync += in_cont.eq(0)
        with m.Elif(is_k & (word.data == int(SataPrimitive.CONT))):
            m.d.sync += in_cont.eq(1)
            m.d.comb += [rx_prim_valid.eq(1), rx_prim.eq(last_rx_prim)]
        with m.Elif(is_k):
            m.d.sync += [in_cont.eq(0), last_rx_prim.eq(word.data)]
            m.d.comb += [rx_prim_valid.eq(1), rx_prim.eq(word.data)]
        with m.Elif(is_d & in_cont):       # junk after CONT: the primitive goes on
            m.d.comb += [rx_prim_valid.eq(1), rx_prim.eq(last_rx_prim)]
        with m.Elif(is_d):
            m.d.comb += rx_data_valid.eq(1)

        def got(p):
            return rx_prim_valid & (rx_prim == int(p))

        # -- transmit: what the state machine wants to send, then the CONT stage -----------------
        want = Signal(32)
        want_is_data = Signal()
        sent = Signal()            # the wanted dword went out this cycle

        tx_lfsr = Signal(16, init=SATA_LINK.SCRAMBLER_SEED)
        tx_mask, tx_lfsr_next = scrambler_dword(tx_lfsr)
        rx_lfsr = Signal(16, init=SATA_LINK.SCRAMBLER_SEED)
        rx_mask, rx_lfsr_next = scrambler_dword(rx_lfsr)
        m.submodules.tx_crc = tx_crc = hw.SATA_CRC(data_width=32).create()
        m.submodules.rx_crc = rx_crc = hw.SATA_CRC(data_width=32).create()

        # receive FIFO and the two dwords held back from it
        m.submodules.rx_fifo = rx_fifo = fifo.SyncFIFOBuffered(width=RX_WORD.size, depth=self._rx_depth)
        m.d.comb += [self.rx.payload.eq(rx_fifo.r_data), self.rx.valid.eq(rx_fifo.r_rdy),
                     rx_fifo.r_en.eq(self.rx.ready)]
        push = Signal(RX_WORD)
        m.d.comb += rx_fifo.w_data.eq(push)
        held = Signal(32)          # the dword before the newest
        newest = Signal(32)
        rx_count = Signal(2)       # dwords held: 0, 1, 2 (saturates)
        overflow = Signal()
        aborted = Signal()
        rx_good = Signal()
        hold_needed = rx_fifo.level >= self._hold_level

        tx_ok = Signal()

        with m.FSM(name="link"):
            with m.State("IDLE"):
                m.d.comb += want.eq(int(SataPrimitive.SYNC))
                m.d.sync += [tx_lfsr.eq(SATA_LINK.SCRAMBLER_SEED), rx_lfsr.eq(SATA_LINK.SCRAMBLER_SEED),
                             rx_count.eq(0), overflow.eq(0), aborted.eq(0)]
                with m.If(up & self.tx.valid):
                    m.next = "SEND-RDY"
                with m.Elif(up & got(SataPrimitive.X_RDY)):
                    m.next = "RECEIVE-RDY"

            # ---- transmit ----
            with m.State("SEND-RDY"):
                m.d.comb += want.eq(int(SataPrimitive.X_RDY))
                with m.If(~up):
                    m.next = "DRAIN"
                with m.Elif(got(SataPrimitive.R_RDY)):   # an X_RDY from the host is ignored: it backs off
                    m.next = "SEND-SOF"
            with m.State("SEND-SOF"):
                m.d.comb += [want.eq(int(SataPrimitive.SOF)), tx_crc.start.eq(1)]
                with m.If(~up):
                    m.next = "DRAIN"
                with m.Elif(sent):
                    m.next = "SEND-DATA"
            with m.State("SEND-DATA"):
                with m.If(got(SataPrimitive.HOLD)):
                    m.d.comb += want.eq(int(SataPrimitive.HOLDA))
                with m.Elif(self.tx.valid):
                    m.d.comb += [want.eq(self.tx.payload.data ^ tx_mask), want_is_data.eq(1),
                                 self.tx.ready.eq(sent), tx_crc.data.eq(self.tx.payload.data),
                                 tx_crc.valid.eq(sent)]
                with m.Else():
                    m.d.comb += want.eq(int(SataPrimitive.HOLD))
                with m.If(sent & want_is_data):
                    m.d.sync += tx_lfsr.eq(tx_lfsr_next)
                with m.If(~up | got(SataPrimitive.SYNC)):
                    m.d.comb += self.tx.ready.eq(0)
                    m.d.comb += tx_crc.valid.eq(0)
                    m.next = "DRAIN"
                with m.Elif(sent & want_is_data & self.tx.payload.last):
                    m.next = "SEND-CRC"
            with m.State("SEND-CRC"):
                m.d.comb += [want.eq(tx_crc.crc ^ tx_mask), want_is_data.eq(1)]
                with m.If(sent):
                    m.d.sync += tx_lfsr.eq(tx_lfsr_next)
                with m.If(~up | got(SataPrimitive.SYNC)):
                    m.d.sync += tx_ok.eq(0)
                    m.next = "SEND-STATUS"
                with m.Elif(sent):
                    m.next = "SEND-EOF"
            with m.State("SEND-EOF"):
                m.d.comb += want.eq(int(SataPrimitive.EOF))
                with m.If(~up | got(SataPrimitive.SYNC)):
                    m.d.sync += tx_ok.eq(0)
                    m.next = "SEND-STATUS"
                with m.Elif(sent):
                    m.next = "SEND-WAIT-RESULT"
            with m.State("SEND-WAIT-RESULT"):
                m.d.comb += want.eq(int(SataPrimitive.WTRM))
                with m.If(~up | got(SataPrimitive.SYNC) | got(SataPrimitive.R_ERR)):
                    m.d.sync += tx_ok.eq(0)
                    m.next = "SEND-STATUS"
                with m.Elif(got(SataPrimitive.R_OK)):
                    m.d.sync += tx_ok.eq(1)
                    m.next = "SEND-STATUS"
            with m.State("DRAIN"):         # the frame was cut short: take the rest of the FIS
                m.d.comb += [want.eq(int(SataPrimitive.SYNC)), self.tx.ready.eq(1)]
                m.d.sync += tx_ok.eq(0)
                with m.If(self.tx.valid & self.tx.payload.last):
                    m.next = "SEND-STATUS"
            with m.State("SEND-STATUS"):
                m.d.comb += [want.eq(int(SataPrimitive.SYNC)), self.tx_status.valid.eq(1),
                             self.tx_status.payload.ok.eq(tx_ok)]
                with m.If(self.tx_status.ready):
                    m.next = "IDLE"

            # ---- receive ----
            with m.State("RECEIVE-RDY"):
                m.d.comb += [want.eq(int(SataPrimitive.R_RDY)), rx_crc.start.eq(1)]
                with m.If(~up | got(SataPrimitive.SYNC)):
                    m.next = "IDLE"
                with m.Elif(got(SataPrimitive.SOF)):
                    m.next = "RECEIVE-DATA"
            with m.State("RECEIVE-DATA"):
                with m.If(hold_needed):
                    m.d.comb += want.eq(int(SataPrimitive.HOLD))
                with m.Elif(got(SataPrimitive.HOLD)):
                    m.d.comb += want.eq(int(SataPrimitive.HOLDA))
                with m.Else():
                    m.d.comb += want.eq(int(SataPrimitive.R_IP))
                with m.If(rx_data_valid):
                    descrambled = word.data ^ rx_mask
                    m.d.sync += [rx_lfsr.eq(rx_lfsr_next), newest.eq(descrambled), held.eq(newest)]
                    m.d.comb += [rx_crc.data.eq(descrambled), rx_crc.valid.eq(1)]
                    with m.If(rx_count == 2):
                        m.d.comb += [push.data.eq(held), rx_fifo.w_en.eq(1)]
                        with m.If(~rx_fifo.w_rdy):
                            m.d.sync += overflow.eq(1)
                    with m.Else():
                        m.d.sync += rx_count.eq(rx_count + 1)
                with m.If(~up | got(SataPrimitive.SYNC)):
                    m.d.sync += aborted.eq(1)
                    m.next = "RECEIVE-END"
                with m.Elif(got(SataPrimitive.EOF)):
                    m.next = "RECEIVE-END"
            with m.State("RECEIVE-END"):   # the FIS's last dword (the newest is the CRC) goes in flagged
                m.d.comb += want.eq(int(SataPrimitive.R_IP))
                error = ~rx_crc.match_detected | overflow | aborted
                m.d.comb += [push.data.eq(held), push.last.eq(1), push.error.eq(error)]
                with m.If(rx_count != 2):   # no FIS dword and CRC: nothing to pass up, a bad frame
                    m.d.sync += rx_good.eq(0)
                    m.next = "RECEIVE-RESULT"
                with m.Else():
                    m.d.comb += rx_fifo.w_en.eq(1)
                    with m.If(rx_fifo.w_rdy):
                        m.d.sync += rx_good.eq(~error)
                        m.next = "RECEIVE-RESULT"
            with m.State("RECEIVE-RESULT"):
                with m.If(rx_good):
                    m.d.comb += want.eq(int(SataPrimitive.R_OK))
                with m.Else():
                    m.d.comb += want.eq(int(SataPrimitive.R_ERR))
                with m.If(~up | got(SataPrimitive.SYNC) | aborted):
                    m.next = "IDLE"

        # -- CONT stage ---------------------------------------------------------------------------
        last_tx_prim = Signal(32)
        repeats = Signal(range(self._junk_run + 2))   # dwords sent in this run of one primitive
        m.d.comb += self.phy_tx.valid.eq(1)
        out = self.phy_tx.payload
        junk_lfsr = Signal(16, init=SATA_LINK.SCRAMBLER_SEED)
        junk, junk_next = scrambler_dword(junk_lfsr)
        same = (want == last_tx_prim) & (repeats != 0)
        restart = self._junk_run + 1
        ready = self.phy_tx.ready
        with m.If(want_is_data):
            with m.If(repeats > SATA_LINK.CONT_AFTER):    # junk went out: end the run before data
                m.d.comb += [out.data.eq(last_tx_prim), out.charisk.eq(SATA_PRIMITIVE_CHARISK)]
                with m.If(ready):
                    m.d.sync += repeats.eq(0)
            with m.Else():
                m.d.comb += [out.data.eq(want), out.charisk.eq(0), sent.eq(ready)]
                with m.If(ready):
                    m.d.sync += repeats.eq(0)
        with m.Else():
            m.d.comb += sent.eq(ready)
            with m.If(same & (repeats == SATA_LINK.CONT_AFTER)):
                m.d.comb += [out.data.eq(int(SataPrimitive.CONT)), out.charisk.eq(SATA_PRIMITIVE_CHARISK)]
            with m.Elif(same & (repeats > SATA_LINK.CONT_AFTER) & (repeats < restart)):
                m.d.comb += [out.data.eq(junk), out.charisk.eq(0)]
                with m.If(ready):
                    m.d.sync += junk_lfsr.eq(junk_next)
            with m.Else():
                m.d.comb += [out.data.eq(want), out.charisk.eq(SATA_PRIMITIVE_CHARISK)]
            with m.If(ready):
                m.d.sync += last_tx_prim.eq(want)
                with m.If(same & (repeats < restart)):
                    m.d.sync += repeats.eq(repeats + 1)
                with m.Else():
                    m.d.sync += repeats.eq(1)
        return m


class SataDevice(wiring.Component):
    """The device's PHY and link layer together: a transceiver below, the transport layer above."""

    def __init__(self, *, oob_timeout: int = 2000, quiet_cycles: int = 64, **link_kwargs):
        from .phy import TransceiverSignature
        self.phy = SataDevicePhy(oob_timeout=oob_timeout, quiet_cycles=quiet_cycles)
        self.link = SataLink(**link_kwargs)
        super().__init__({
            "trx": Out(TransceiverSignature()),
            "tx": In(stream.Signature(TX_WORD)),
            "tx_status": Out(stream.Signature(TX_STATUS)),
            "rx": Out(stream.Signature(RX_WORD)),
            "link_up": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.phy = phy = self.phy
        m.submodules.link = link = self.link
        wiring.connect(m, wiring.flipped(self.trx), phy.trx)
        wiring.connect(m, link.phy_tx, phy.tx)
        wiring.connect(m, phy.rx, link.phy_rx)
        m.d.comb += link.phy_link_up.eq(phy.link_up)
        wiring.connect(m, wiring.flipped(self.tx), link.tx)
        wiring.connect(m, link.tx_status, wiring.flipped(self.tx_status))
        wiring.connect(m, link.rx, wiring.flipped(self.rx))
        m.d.comb += self.link_up.eq(link.link_up)
        return m
