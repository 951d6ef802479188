"""One NAND channel: descriptor checks, multi-way scheduling, page data paths, ECC.

What a channel does, and why it is shaped like this
===================================================

A channel is one ONFI bus (:class:`rtl.nand.phy.OnfiPhy`) shared by ``ways``
targets.  Every flash operation is bus traffic, then a long busy period of
the target alone (tR 25 us, tPROG 230 us, tBERS 0.7 ms on the realistic part),
then sometimes more traffic.  With one target the bus idles most of the time;
the point of several ways is to fill the busy period of one target with bus
traffic for the others.  So each operation is cut into **phases** at its busy
periods -- READ is "00h address 30h" | busy | "05h column E0h, data out",
PROGRAM is "80h address data 10h" | busy | "70h, status", COPYBACK has two
busy periods -- and the channel runs phases, not operations:

* Descriptors enter through ``desc``, are checked against the geometry
  (a bad one completes at once with an error and never reaches the bus), and
  wait in a small FIFO per target.
* The **bus engine** picks a target round-robin -- first among idle targets
  whose queued operation starts with a command and an address only (READ,
  ERASE, COPYBACK: the die then works alone), then among targets whose R/B#
  says their busy period ended, then among idle targets with any queued
  descriptor -- and runs that target's next phase to its end.  A phase that
  ends in a busy period leaves the target *pending*; the engine is free at
  once for another target.
* A phase is a short **microprogram** of bus operations (command, address,
  data burst, wait-tWB, wait-ready) taken from a table built at elaboration
  (:func:`microcode`), so adding an operation is a table edit.

Data moves between the page buffer (:class:`rtl.nand.pagebuf.PageBuffer`) and
the PHY one byte per cycle at most -- faster than any ONFI SDR mode, so the
bus never waits for the buffer:

* **program**: buffer reader -> CRC -> BCH encoder (bytes pass through, parity
  is collected in a FIFO) -> PHY; after the user bytes, CHANGE WRITE COLUMN
  (85h) to the parity area and the parity FIFO -> PHY.
* **read**: the parity area is read first into the parity FIFO (05h-E0h to the
  parity column), then the user bytes (05h-E0h to the column): each byte goes
  to the buffer, the CRC and the BCH decoder; after a codeword's data the
  decoder is fed that codeword's parity from the FIFO.  The decoder's
  corrections come back as (offset, mask) and are applied to the buffer by a
  read-modify-write that has priority over incoming bytes.  If anything was
  corrected the CRC is recomputed over the corrected slot before completion.

Page layout with ECC (``atomflash.spec.nand_page_layout``): data codewords of
``ECC.codeword`` bytes, the OOB record as one more (short) codeword right
after the data, then every codeword's parity in order.  ECC ranges must be
whole codewords (checked); ``raw`` descriptors bypass ECC and may address any
byte range of the page.

Completions (``cpl``) carry the tag, the result, the last status byte, ECC
counts and the CRC of the transferred bytes as they are in the slot.  They
leave in completion order: per target in issue order, across targets in any.

**Multi-plane** descriptors (``multi_plane``) are the same phases over two
planes: every step carries a plane bit choosing ``block`` or ``block ^ 1``
for the row and ``slot`` or ``slot2`` for the data, so the ONFI address rules
hold by construction.  The planes are joined by 11h / 32h / D1h and tDBSY,
waited on R/B# inside the phase (under a microsecond: not worth a scheduling
round).  Reads pick each plane's register with CHANGE READ COLUMN ENHANCED;
the partner's bytes wait until the first plane's corrections are written,
because one corrector serves one slot at a time.  Status is READ STATUS
ENHANCED per plane, so a completion names the plane that failed.  Whether a
target takes multi-plane operations is learnt from its parameter page as
READ_PARAM passes through, which bring-up issues anyway.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import NandOp, NandResult, OnfiCmd
from rtl import spec as layouts
from rtl.lib.roundrobin import round_robin

from .pagebuf import CHAN_READ_LATENCY, BufferPortSignature, PageBuffer
from .phy import OnfiBusSignature, OnfiPhy, PhyKind
from .timing import TIMING

__all__ = ["NandChannel", "ChannelParams", "microcode"]


class ByteSel(enum.Enum, shape=4):
    CONST = 0
    COL0 = 1
    COL1 = 2
    ROW0 = 3
    ROW1 = 4
    ROW2 = 5
    DROW0 = 6
    DROW1 = 7
    DROW2 = 8
    PCOL0 = 9
    PCOL1 = 10


class CountSel(enum.Enum, shape=2):
    ONE = 0
    LEN = 1
    PARITY = 2


class Path(enum.Enum, shape=3):
    NONE = 0
    BUF = 1      # buffer at the descriptor's column
    BUF0 = 2     # buffer from offset 0 (ID / parameter page)
    PARITY = 3   # the parity FIFO
    STATUS = 4   # the status register


class End(enum.Enum, shape=2):
    NEXT = 0
    PEND = 1     # the target is busy now: park the operation, free the bus
    DONE = 2     # the operation is complete


STEP = data.StructLayout({
    "kind": PhyKind, "byte_sel": ByteSel, "const": 8, "count": CountSel, "path": Path, "end": End, "ccs": 1,
    "plane": 1,     # multi-plane: the row and the slot are block ^ 1's and slot2
})


class ChannelParams:
    """Elaboration parameters of a channel (geometry from a NandProfile)."""

    def __init__(self, profile: spec.NandProfile | str = "small", ways: int = spec.NAND_DEFAULTS.WAYS,
                 slots: int = spec.NAND_DEFAULTS.SLOTS, queue: int = spec.NAND_DEFAULTS.QUEUE,
                 ecc: bool = True, col_cycles: int = 2, row_cycles: int = 3, sim_gate_ecc: bool = False,
                 multi_plane: bool | None = None):
        self.profile = spec.NAND_PROFILES[profile] if isinstance(profile, str) else profile
        self.layout = spec.nand_page_layout(self.profile)
        self.ways, self.slots, self.queue, self.ecc = ways, slots, queue, ecc
        self.sim_gate_ecc = sim_gate_ecc  # simulation speed: the BCH decoder's clock gated while idle
        self.col_cycles, self.row_cycles = col_cycles, row_cycles
        # two-plane READ/PROGRAM/ERASE gateware (default: the profile has two planes); each target
        # must also claim it in its parameter page (see NandChannel)
        self.multi_plane = (self.profile.planes == 2) if multi_plane is None else multi_plane
        p = self.profile
        assert not self.multi_plane or p.planes == 2
        self.page_bits = (p.pages_per_block - 1).bit_length()
        self.block_bits = (p.blocks_per_lun - 1).bit_length()
        self.lun_bits = (p.luns - 1).bit_length()
        assert self.page_bits + self.block_bits + self.lun_bits <= 8 * row_cycles <= 24
        assert col_cycles == 2
        assert spec.ECC.codeword & (spec.ECC.codeword - 1) == 0

    def row_address(self, lun: int, block: int, page: int) -> int:
        return (((lun << self.block_bits) | block) << self.page_bits) | page


def microcode(p: ChannelParams):
    """The phase microprograms: ``(steps, {(op, phase, ecc, multi_plane): entry index})``."""
    steps, entries = [], {}

    def step(kind, byte_sel=ByteSel.CONST, const=0, count=CountSel.ONE, path=Path.NONE, end=End.NEXT, ccs=0,
             plane=0):
        steps.append(dict(kind=kind, byte_sel=byte_sel, const=int(const), count=count, path=path, end=end,
                          ccs=ccs, plane=plane))

    def cmd(c):
        step(PhyKind.CMD, const=c)

    def addr(sel, const=0, plane=0):
        step(PhyKind.ADDR, sel, const, plane=plane)

    def row(dst=False, plane=0):
        base = [ByteSel.DROW0, ByteSel.DROW1, ByteSel.DROW2] if dst else [ByteSel.ROW0, ByteSel.ROW1, ByteSel.ROW2]
        for i in range(p.row_cycles):
            addr(base[i], plane=plane)

    def busy():
        step(PhyKind.WAIT_BUSY, end=End.PEND)

    def status():
        step(PhyKind.WAIT_READY)
        cmd(OnfiCmd.READ_STATUS)
        step(PhyKind.READ, count=CountSel.ONE, path=Path.STATUS, end=End.DONE)

    def change_read_column(c0, c1):
        cmd(OnfiCmd.CHANGE_READ_COL_1)
        addr(c0)
        addr(c1)
        cmd(OnfiCmd.CHANGE_READ_COL_2)

    def program(op, phase, ecc_variants, body, mp=0):
        for e in ecc_variants:
            entries[(op, phase, e, mp)] = len(steps)
            body(e)

    both = (0, 1)
    program(NandOp.RESET, 0, both, lambda e: (cmd(OnfiCmd.RESET), busy()))
    program(NandOp.RESET, 1, both, lambda e: status())
    program(NandOp.READ_ID, 0, both, lambda e: (
        cmd(OnfiCmd.READ_ID), addr(ByteSel.COL0),
        step(PhyKind.READ, count=CountSel.LEN, path=Path.BUF0, end=End.DONE)))
    program(NandOp.READ_PARAM, 0, both, lambda e: (cmd(OnfiCmd.READ_PARAM_PAGE), addr(ByteSel.CONST, 0), busy()))
    program(NandOp.READ_PARAM, 1, both, lambda e: (
        step(PhyKind.WAIT_READY), change_read_column(ByteSel.CONST, ByteSel.CONST),
        step(PhyKind.READ, count=CountSel.LEN, path=Path.BUF0, end=End.DONE, ccs=1)))
    program(NandOp.READ_STATUS, 0, both, lambda e: (
        cmd(OnfiCmd.READ_STATUS), step(PhyKind.READ, count=CountSel.ONE, path=Path.STATUS, end=End.DONE)))

    def read0(e):
        cmd(OnfiCmd.READ_1)
        addr(ByteSel.CONST)
        addr(ByteSel.CONST)
        row()
        cmd(OnfiCmd.READ_2)
        busy()

    def read1(e):
        step(PhyKind.WAIT_READY)
        if e:
            change_read_column(ByteSel.PCOL0, ByteSel.PCOL1)
            step(PhyKind.READ, count=CountSel.PARITY, path=Path.PARITY, ccs=1)
        change_read_column(ByteSel.COL0, ByteSel.COL1)
        step(PhyKind.READ, count=CountSel.LEN, path=Path.BUF, end=End.DONE, ccs=1)

    program(NandOp.READ, 0, both, read0)
    program(NandOp.READ, 1, both, read1)

    def program0(e):
        cmd(OnfiCmd.PROGRAM_1)
        addr(ByteSel.COL0)
        addr(ByteSel.COL1)
        row()
        step(PhyKind.WRITE, count=CountSel.LEN, path=Path.BUF)
        if e:
            cmd(OnfiCmd.CHANGE_WRITE_COL)
            addr(ByteSel.PCOL0)
            addr(ByteSel.PCOL1)
            step(PhyKind.WRITE, count=CountSel.PARITY, path=Path.PARITY, ccs=1)
        cmd(OnfiCmd.PROGRAM_2)
        busy()

    program(NandOp.PROGRAM, 0, both, program0)
    program(NandOp.PROGRAM, 1, both, lambda e: status())
    program(NandOp.ERASE, 0, both, lambda e: (cmd(OnfiCmd.ERASE_1), row(), cmd(OnfiCmd.ERASE_2), busy()))
    program(NandOp.ERASE, 1, both, lambda e: status())
    program(NandOp.COPYBACK, 0, both, lambda e: (
        cmd(OnfiCmd.READ_1), addr(ByteSel.CONST), addr(ByteSel.CONST), row(), cmd(OnfiCmd.COPYBACK_READ_2), busy()))
    program(NandOp.COPYBACK, 1, both, lambda e: (
        step(PhyKind.WAIT_READY), cmd(OnfiCmd.CHANGE_WRITE_COL), addr(ByteSel.CONST), addr(ByteSel.CONST),
        row(dst=True), cmd(OnfiCmd.PROGRAM_2), busy()))
    program(NandOp.COPYBACK, 2, both, lambda e: status())
    program(NandOp.SET_FEATURES, 0, both, lambda e: (
        cmd(OnfiCmd.SET_FEATURES), addr(ByteSel.COL0),
        step(PhyKind.WRITE, count=CountSel.LEN, path=Path.BUF0), busy()))
    program(NandOp.SET_FEATURES, 1, both, lambda e: step(PhyKind.WAIT_READY, end=End.DONE))
    if p.multi_plane:
        multi_plane_microcode(p, step, cmd, addr, row, busy, change_read_column, program)
    return steps, entries


def multi_plane_microcode(p: ChannelParams, step, cmd, addr, row, busy, change_read_column, program):
    """Two planes, ``block`` (plane step 0) then ``block ^ 1`` (plane step 1): each but the last
    plane confirmed with 11h / 32h / D1h and tDBSY waited out on R/B#, one array operation."""
    both = (0, 1)

    def t_dbsy():
        step(PhyKind.WAIT_BUSY)
        step(PhyKind.WAIT_READY)

    def plane_status():
        # READ STATUS ENHANCED per plane: the completion says which plane failed
        step(PhyKind.WAIT_READY)
        for pl in (0, 1):
            cmd(OnfiCmd.READ_STATUS_ENH)
            row(plane=pl)
            step(PhyKind.READ, count=CountSel.ONE, path=Path.STATUS, end=End.DONE if pl else End.NEXT, plane=pl)

    def program0(e):
        for pl in (0, 1):
            cmd(OnfiCmd.PROGRAM_1)
            addr(ByteSel.COL0)
            addr(ByteSel.COL1)
            row(plane=pl)
            step(PhyKind.WRITE, count=CountSel.LEN, path=Path.BUF, plane=pl)
            if e:
                cmd(OnfiCmd.CHANGE_WRITE_COL)
                addr(ByteSel.PCOL0)
                addr(ByteSel.PCOL1)
                step(PhyKind.WRITE, count=CountSel.PARITY, path=Path.PARITY, ccs=1)
            if pl == 0:
                cmd(OnfiCmd.PROGRAM_MULTI_PLANE)
                t_dbsy()
        cmd(OnfiCmd.PROGRAM_2)
        busy()

    def read0(e):
        for pl in (0, 1):
            cmd(OnfiCmd.READ_1)
            addr(ByteSel.CONST)
            addr(ByteSel.CONST)
            row(plane=pl)
            if pl == 0:
                cmd(OnfiCmd.READ_MULTI_PLANE)
                t_dbsy()
        cmd(OnfiCmd.READ_2)
        busy()

    def read1(e):
        # CHANGE READ COLUMN ENHANCED picks the plane's register; 05h-E0h then moves inside it
        step(PhyKind.WAIT_READY)
        for pl in (0, 1):
            cmd(OnfiCmd.CHANGE_READ_COL_ENH)
            addr(ByteSel.PCOL0 if e else ByteSel.COL0)
            addr(ByteSel.PCOL1 if e else ByteSel.COL1)
            row(plane=pl)
            cmd(OnfiCmd.CHANGE_READ_COL_2)
            if e:
                step(PhyKind.READ, count=CountSel.PARITY, path=Path.PARITY, ccs=1, plane=pl)
                change_read_column(ByteSel.COL0, ByteSel.COL1)
            step(PhyKind.READ, count=CountSel.LEN, path=Path.BUF, end=End.DONE if pl else End.NEXT, ccs=1, plane=pl)

    def erase0(e):
        for pl in (0, 1):
            cmd(OnfiCmd.ERASE_1)
            row(plane=pl)
            if pl == 0:
                cmd(OnfiCmd.ERASE_MULTI_PLANE)
                t_dbsy()
        cmd(OnfiCmd.ERASE_2)
        busy()

    program(NandOp.PROGRAM, 0, both, program0, mp=1)
    program(NandOp.PROGRAM, 1, both, lambda e: plane_status(), mp=1)
    program(NandOp.READ, 0, both, read0, mp=1)
    program(NandOp.READ, 1, both, read1, mp=1)
    program(NandOp.ERASE, 0, both, erase0, mp=1)
    program(NandOp.ERASE, 1, both, lambda e: plane_status(), mp=1)


class NandChannel(wiring.Component):
    """A NAND channel: ``ways`` targets on one ONFI bus, page buffer, ECC.

    Ports
    -----
    desc : In(stream of ``rtl.spec.NAND_DESC``)
        Operation descriptors (``atomflash.spec.NAND_DESC``).
    cpl : Out(stream of ``rtl.spec.NAND_CPL``)
        One completion per descriptor (``atomflash.spec.NAND_CPL``).
    buf : In(:class:`BufferPortSignature` (word address, 32 bits))
        The page buffer's FTL/DMA port: word ``w`` of slot ``s`` at
        ``s * slot_words + w``; read data :data:`~rtl.nand.pagebuf.HOST_READ_LATENCY`
        cycles after the address.
    timing : In(:data:`rtl.nand.timing.TIMING`)
        ONFI timing in cycles (``rtl.nand.timing.timing_const(mode)``).
    bus : Out(:class:`rtl.nand.phy.OnfiBusSignature` (ways))
        The ONFI pins.
    busy : Out(1)
        Some descriptor is queued or executing.
    """

    def __init__(self, params: ChannelParams | None = None, channel_index: int = 0):
        self.p = params or ChannelParams()
        self.channel_index = channel_index
        self.slot_words = self._slot_bytes() // 4
        super().__init__({
            "desc": In(stream.Signature(layouts.NAND_DESC)),
            "cpl": Out(stream.Signature(layouts.NAND_CPL)),
            "buf": In(BufferPortSignature((self.p.slots * self.slot_words - 1).bit_length(), 32)),
            "timing": In(TIMING),
            "bus": Out(OnfiBusSignature(self.p.ways)),
            "busy": Out(1),
        })

    def _slot_bytes(self):
        return -(-self.p.profile.page_bytes // 4) * 4

    # -- descriptor checks ---------------------------------------------------------
    def check(self, d, mp_ok=None):
        """Combinational NandResult for descriptor view ``d`` (OK when valid); ``mp_ok``: one bit per
        target, the target takes multi-plane descriptors."""
        p, lay = self.p, self.p.layout
        prof = p.profile
        cw = spec.ECC.codeword
        op = d.opcode
        is_ = lambda *ops: Cat(*[op == o for o in ops]).any()  # noqa: E731
        uses_ecc = self.uses_ecc(d)
        m_end = d.column + d.length
        mp = d.flags.multi_plane
        if mp_ok is None or not p.multi_plane:
            mp_target = Const(0)
        else:
            mp_target = mp_ok.bit_select(d.target[:max(1, (p.ways - 1).bit_length())], 1)
        checks = [
            (op > max(NandOp), NandResult.BAD_OPCODE),
            (d.channel != self.channel_index, NandResult.BAD_CHANNEL),
            (d.target >= p.ways, NandResult.BAD_TARGET),
            # the second plane is block ^ 1 in the same LUN and page: the ONFI address rules
            # (same LUN and page, another plane, same block bits above it) hold by construction
            (mp & (~is_(NandOp.READ, NandOp.PROGRAM, NandOp.ERASE) | ~mp_target), NandResult.BAD_PLANE),
            (is_(NandOp.READ, NandOp.PROGRAM, NandOp.ERASE, NandOp.COPYBACK) & (d.lun >= prof.luns),
             NandResult.BAD_LUN),
            ((is_(NandOp.READ, NandOp.PROGRAM, NandOp.ERASE, NandOp.COPYBACK) & (d.block >= prof.blocks_per_lun)) |
             (is_(NandOp.COPYBACK) & (d.dst_block >= prof.blocks_per_lun)), NandResult.BAD_BLOCK),
            ((is_(NandOp.READ, NandOp.PROGRAM, NandOp.COPYBACK) & (d.page >= prof.pages_per_block)) |
             (is_(NandOp.COPYBACK) & (d.dst_page >= prof.pages_per_block)), NandResult.BAD_PAGE),
            ((is_(NandOp.READ, NandOp.PROGRAM, NandOp.READ_ID, NandOp.READ_PARAM, NandOp.SET_FEATURES) &
              (d.slot >= p.slots)) |
             (mp & is_(NandOp.READ, NandOp.PROGRAM) & (d.slot2 >= p.slots)) |
             (mp & is_(NandOp.READ) & (d.slot2 == d.slot)),
             NandResult.BAD_SLOT),
            ((is_(NandOp.READ, NandOp.PROGRAM) & (d.column >= prof.page_bytes)) |
             (uses_ecc & ~((d.column < prof.page_data) & (d.column % cw == 0) | (d.column == lay.oob_col))) |
             (is_(NandOp.READ_ID, NandOp.SET_FEATURES) & (d.column > 0xFF)), NandResult.BAD_COLUMN),
            ((is_(NandOp.READ, NandOp.PROGRAM, NandOp.READ_ID, NandOp.READ_PARAM) & (d.length == 0)) |
             (is_(NandOp.READ, NandOp.PROGRAM) & (m_end > prof.page_bytes)) |
             (is_(NandOp.READ_ID, NandOp.READ_PARAM) & (d.length > self._slot_bytes())) |
             (is_(NandOp.SET_FEATURES) & (d.length != 4)) |
             (uses_ecc & ~((m_end <= prof.page_data) & (m_end % cw == 0) | (m_end == lay.user_bytes))),
             NandResult.BAD_LENGTH),
        ]
        value = Const(NandResult.OK, 8)
        for cond, code in reversed(checks):
            value = Mux(cond, code, value)
        return value

    @staticmethod
    def short_first_phase(desc_bits):
        """The descriptor's first phase is a command and an address ending in a busy period."""
        op = data.View(layouts.NAND_DESC, desc_bits).opcode
        return (op == NandOp.READ) | (op == NandOp.ERASE) | (op == NandOp.COPYBACK)

    def uses_ecc(self, d):
        if not self.p.ecc:
            return Const(0)
        return ((d.opcode == NandOp.READ) | (d.opcode == NandOp.PROGRAM)) & ~d.flags.raw

    @staticmethod
    def _learn_multi_plane(m, rx, rx_path, rx_col, d, cur_t, mp_pe_ok, mp_rd_ok):
        """Watch READ_PARAM's bytes: a copy of the parameter page with its signature and CRC-16
        sets whether the target takes multi-plane program/erase (features bit, READ STATUS
        ENHANCED, one plane bit) and read (features bit, CHANGE READ COLUMN ENHANCED, one plane bit).
        The firmware reads the parameter page at bring-up anyway; no register to set."""
        P = spec.ONFI_PARAM
        byte = rx.payload
        col = rx_col[:8]                  # a copy is 256 bytes: each copy is judged on its own
        assert P.PAGE_BYTES == 256
        take = rx.valid & rx.ready & (rx_path == Path.BUF0) & (d.opcode == NandOp.READ_PARAM)
        crc = Signal(16)
        sig_ok, pe, rd, crc_lo = Signal(), Signal(), Signal(), Signal(8)
        nxt = Mux(col == 0, P.CRC_INIT, crc) ^ (byte << 8)
        for _ in range(8):
            nxt = Mux(nxt[15], (nxt << 1)[:16] ^ P.CRC_POLY, (nxt << 1)[:16])
        sig = P.SIGNATURE_VALUE.to_bytes(4, "little")
        feat = [int(spec.OnfiParamFeature.MULTI_PLANE_PROGRAM_ERASE), int(spec.OnfiParamFeature.MULTI_PLANE_READ)]
        opt = [int(spec.OnfiOptCommand.READ_STATUS_ENHANCED), int(spec.OnfiOptCommand.CHANGE_READ_COLUMN_ENHANCED)]
        with m.If(take & (col < P.CRC)):
            m.d.sync += crc.eq(nxt)
        with m.If(take):
            with m.Switch(col):
                with m.Case(0):
                    m.d.sync += [sig_ok.eq(byte == sig[0]), pe.eq(1), rd.eq(1)]
                for i in range(1, 4):
                    with m.Case(P.SIGNATURE + i):
                        m.d.sync += sig_ok.eq(sig_ok & (byte == sig[i]))
                for off, bits in ((P.FEATURES, feat), (P.OPT_COMMANDS, opt)):
                    for b in bits:
                        assert b < 8        # in the field's low byte
                    with m.Case(off):
                        m.d.sync += [pe.eq(pe & byte[bits[0]]), rd.eq(rd & byte[bits[1]])]
                with m.Case(P.PLANE_ADDR_BITS):
                    m.d.sync += [pe.eq(pe & (byte[:4] == 1)), rd.eq(rd & (byte[:4] == 1))]
                with m.Case(P.CRC):
                    m.d.sync += crc_lo.eq(byte)
                with m.Case(P.CRC + 1):
                    with m.If(sig_ok & (Cat(crc_lo, byte) == crc)):
                        m.d.sync += [mp_pe_ok.bit_select(cur_t, 1).eq(pe), mp_rd_ok.bit_select(cur_t, 1).eq(rd)]

    # -----------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        p, lay, prof = self.p, self.p.layout, self.p.profile
        W = p.ways
        CW = spec.ECC.codeword
        P = spec.ECC.parity_bytes
        n_data_cw = lay.data_codewords
        slot_bytes = self._slot_bytes()

        m.submodules.phy = phy = OnfiPhy(targets=W)
        m.submodules.pagebuf = pagebuf = PageBuffer(p.slots, slot_bytes)
        wiring.connect(m, wiring.flipped(self.bus), phy.bus)
        wiring.connect(m, wiring.flipped(self.buf), pagebuf.host)
        m.d.comb += phy.timing.eq(self.timing)
        chan = pagebuf.chan

        if p.ecc:
            from rtl.ecc.bch import BchCode, BchDecoder, BchEncoder
            e = spec.ECC
            code = BchCode(e.m, e.t, e.codeword, e.prim_poly)
            m.submodules.enc = enc = BchEncoder(code)
            m.submodules.dec = dec = BchDecoder(code, sim_gate_idle=p.sim_gate_ecc)
        m.submodules.crc = crc = layouts.NAND_CRC(data_width=8).create()
        # the CRC's inputs are registered (timing closure): its result lags the bytes by a
        # cycle, and every reader of crc.crc is at least two cycles after the
        # last byte (DATA -> NEXT -> FINISH / RESCAN -> COMPLETE, or a busy period)
        crc_in = Signal(data.StructLayout({"start": 1, "valid": 1, "data": 8}))
        m.d.sync += [crc.start.eq(crc_in.start), crc.valid.eq(crc_in.valid), crc.data.eq(crc_in.data)]
        m.submodules.parity = parity = fifo.SyncFIFO(width=8, depth=max(lay.parity_bytes, 4))
        m.submodules.cplq = cplq = fifo.SyncFIFO(width=layouts.NAND_CPL.size, depth=4)
        m.d.comb += [
            self.cpl.valid.eq(cplq.r_rdy),
            self.cpl.payload.eq(cplq.r_data),
            cplq.r_en.eq(self.cpl.ready),
        ]

        # -- per-target queues ------------------------------------------------------
        queues = []
        for t in range(W):
            q = fifo.SyncFIFO(width=layouts.NAND_DESC.size, depth=p.queue + 1)
            m.submodules[f"queue{t}"] = q
            queues.append(q)
        q_rdy = Cat(q.r_rdy for q in queues)
        q_data = Array(q.r_data for q in queues)
        started = Signal(W)
        pending = Signal(W)
        phase = Array(Signal(2, name=f"phase{t}") for t in range(W))

        # which targets claimed multi-plane operations in their parameter page (learnt from
        # READ_PARAM as it passes): program/erase, read
        mp_pe_ok = Signal(W)
        mp_rd_ok = Signal(W)

        # -- input: check (registered with the descriptor, for timing closure), then queue or
        # complete with an error
        d_in = Signal(layouts.NAND_DESC)
        in_valid = Signal()
        in_take = Signal()
        verdict = Signal(8)
        m.d.comb += self.desc.ready.eq(~in_valid | in_take)
        with m.If(self.desc.ready):
            m.d.sync += [in_valid.eq(self.desc.valid), d_in.eq(self.desc.payload),
                         verdict.eq(self.check(self.desc.payload, Mux(self.desc.payload.opcode == NandOp.READ,
                                                                      mp_rd_ok, mp_pe_ok)))]
        engine_cpl = Signal()       # the bus engine writes a completion this cycle
        err_cpl = Signal(layouts.NAND_CPL)
        m.d.comb += [
            err_cpl.tag.eq(d_in.tag), err_cpl.result.eq(verdict),
            err_cpl.channel.eq(self.channel_index), err_cpl.target.eq(d_in.target),
        ]
        for q in queues:
            m.d.comb += q.w_data.eq(d_in)
        with m.If(in_valid):
            with m.If(verdict != NandResult.OK):
                with m.If(cplq.w_rdy & ~engine_cpl):
                    m.d.comb += [cplq.w_en.eq(1), cplq.w_data.eq(err_cpl), in_take.eq(1)]
            with m.Else():
                for t, q in enumerate(queues):
                    with m.If(d_in.target == t):
                        m.d.comb += [q.w_en.eq(1), in_take.eq(q.w_rdy)]

        # -- the descriptor being worked on -----------------------------------------
        cur_t = Signal(range(max(W, 2)))
        d = Signal(layouts.NAND_DESC)
        use_ecc = Signal()
        ph = Signal(2)
        row = Signal(24)
        row2 = Signal(24)       # multi-plane: the partner block's (block ^ 1)
        drow = Signal(24)
        mp = Signal()
        m.d.comb += [
            mp.eq(d.flags.multi_plane if p.multi_plane else 0),
            row.eq(Cat(Mux(d.opcode == NandOp.ERASE, 0, d.page[:p.page_bits]), d.block[:p.block_bits], d.lun[:p.lun_bits])),
            row2.eq(row ^ (1 << p.page_bits)),
            drow.eq(Cat(d.dst_page[:p.page_bits], d.dst_block[:p.block_bits], d.lun[:p.lun_bits])),
        ]
        # Values derived from ``d``, registered in two stages so that no bus
        # operation waits for the descriptor arithmetic (it was the critical
        # path).  ``d`` changes only in PICK; stage 1 is valid from ENTRY,
        # stage 2 from the first STEP, before any of them is used.  The
        # products by the parity size are constant tables (a few LUTs), not
        # multipliers.
        d_end = Signal(17)
        cw_first = Signal(range(lay.codewords + 1))     # stage 1
        cw_end = Signal(range(lay.codewords + 1))       # stage 1
        slot_base = Signal(range(p.slots * slot_bytes + 1))  # stage 1
        n_cw = Signal(range(lay.codewords + 1))         # stage 2
        n_par = Signal(16)                              # stage 2: n_cw * P
        pcol = Signal(16)                               # stage 2: parity column of cw_first
        col_addr = Signal.like(slot_base)               # stage 2: slot_base + d.column
        slot2_base = Signal.like(slot_base)             # stage 1: multi-plane, slot2
        col_addr2 = Signal.like(slot_base)              # stage 2: slot2_base + d.column
        cw_shift = CW.bit_length() - 1
        m.d.comb += d_end.eq(d.column + d.length)
        m.d.sync += [
            cw_first.eq(Mux(d.column >= prof.page_data, n_data_cw, d.column >> cw_shift)),
            cw_end.eq(Mux(d_end > prof.page_data, lay.codewords, d_end >> cw_shift)),
            slot_base.eq(Array(Const(s * slot_bytes, slot_base.shape()) for s in range(p.slots))[
                d.slot[:max(1, (p.slots - 1).bit_length())]]),
            n_cw.eq(cw_end - cw_first),
            col_addr.eq(slot_base + d.column),
            slot2_base.eq(Array(Const(s * slot_bytes, slot_base.shape()) for s in range(p.slots))[
                d.slot2[:max(1, (p.slots - 1).bit_length())]]),
            col_addr2.eq(slot2_base + d.column),
        ]
        with m.Switch(cw_end - cw_first):
            for k in range(lay.codewords + 1):
                with m.Case(k):
                    m.d.sync += n_par.eq(k * P)
        with m.Switch(cw_first):
            for k in range(lay.codewords + 1):
                with m.Case(k):
                    m.d.sync += pcol.eq(lay.parity_col + k * P)

        # -- microcode ROM -------------------------------------------------------------
        steps, entries = microcode(p)
        # ``st`` is the ROM word at ``pc``, registered: it is loaded together
        # with ``pc`` (``rom_next[pc]`` is ``rom[pc + 1]``), so the step's
        # fields start from flip-flops (timing closure)
        rom = Array(Const.cast(STEP.const(s)) for s in steps)
        rom_next = Array(Const.cast(STEP.const(s)) for s in steps[1:] + steps[-1:])
        pc = Signal(range(len(steps)))
        st = Signal(STEP)
        entry = Signal(range(len(steps)))
        with m.Switch(Cat(use_ecc, ph, d.opcode[:4], mp)):
            for (op, phs, e, mpl), idx in entries.items():
                with m.Case(e | (phs << 1) | (int(op) << 3) | (mpl << 7)):
                    m.d.comb += entry.eq(idx)

        byte = Signal(8)
        rowp = Mux(st.plane, row2, row)
        with m.Switch(st.byte_sel):
            for sel, val in [(ByteSel.CONST, st.const), (ByteSel.COL0, d.column[:8]), (ByteSel.COL1, d.column[8:16]),
                             (ByteSel.ROW0, rowp[:8]), (ByteSel.ROW1, rowp[8:16]), (ByteSel.ROW2, rowp[16:24]),
                             (ByteSel.DROW0, drow[:8]), (ByteSel.DROW1, drow[8:16]), (ByteSel.DROW2, drow[16:24]),
                             (ByteSel.PCOL0, pcol[:8]), (ByteSel.PCOL1, pcol[8:16])]:
                with m.Case(sel):
                    m.d.comb += byte.eq(val)
        count = Signal(16)
        m.d.comb += count.eq(Mux(st.count == CountSel.LEN, d.length, Mux(st.count == CountSel.PARITY, n_par, 1)))
        m.d.comb += [
            phy.op.payload.kind.eq(st.kind),
            phy.op.payload.target.eq(cur_t),
            phy.op.payload.byte.eq(byte),
            phy.op.payload.count.eq(count),
            phy.op.payload.ccs.eq(st.ccs),
            # ID, parameter page and feature bytes move on two edges each in NV-DDR2
            phy.op.payload.dup.eq(st.path == Path.BUF0),
        ]

        # -- data path state -------------------------------------------------------------
        tx_path = Signal(Path)       # source of PHY write bytes
        tx_left = Signal(16)         # bytes the PHY still has to take
        rd_left = Signal(16)         # buffer bytes still to read
        rd_addr = Signal(range(p.slots * slot_bytes + 1))
        rd_col = Signal(16)
        rd_inflight = Signal(CHAN_READ_LATENCY + 1)  # buffer reads on their way: address .. r_data, chan_q
        rd_last = Signal(CHAN_READ_LATENCY + 1)
        rescan = Signal()            # buffer -> CRC only (after corrections)
        rescan2 = Signal()           # multi-plane: rescanning slot2
        rx_path = Signal(Path)
        rx_left = Signal(16)
        rx_addr = Signal(range(p.slots * slot_bytes + 1))
        rx_col = Signal(16)
        status = Signal(8)
        status2 = Signal(8)          # multi-plane: the partner plane's 78h status
        rx_plane = Signal()          # the READ in progress is the partner plane's (status2)
        corr_plane = Signal()        # the codewords being corrected are in slot2 (set when its bytes start)
        bad_1 = Signal()             # multi-plane READ: the first plane's ECC verdict, kept at the switch
        erased_1 = Signal()
        feed_par = Signal()          # decoder takes parity from the FIFO now
        feed_left = Signal(range(P + 1))
        # ECC result accumulation
        res_count = Signal(range(lay.codewords + 1))
        ecc_total = Signal(16)
        ecc_max = Signal(8)
        ecc_bad = Signal()
        ecc_erased = Signal()
        fix_cw = Signal(range(lay.codewords + 1))
        corr_busy = Signal()         # a correction is in progress (from its address cycle to its write)
        corr_stage = Signal(range(CHAN_READ_LATENCY + 4))   # 0 idle, 1 read, .. r_data, hold, write
        corr_addr = Signal.like(rx_addr)
        corr_mask = Signal(8)
        corr_data = Signal(8)

        # buffer reader -> small FIFO (program bytes / rescan)
        # deep enough for a byte a cycle over the read's round trip
        m.submodules.rdq = rdq = fifo.SyncFIFO(width=9, depth=8)
        in_flight = sum(rd_inflight[i] for i in range(len(rd_inflight)))
        rd_room = (rdq.w_level + in_flight) < rdq.depth
        rd_issue = Signal()
        chan_rx_write = Signal()
        corr_read = Signal()
        corr_write = Signal()
        m.d.comb += rd_issue.eq((rd_left != 0) & rd_room & ~corr_busy & ~corr_read)
        m.d.sync += [rd_inflight.eq(Cat(rd_issue, rd_inflight[:-1])),
                     rd_last.eq(Cat(((rd_col % CW) == CW - 1) | (rd_left == 1) | (rd_col == prof.page_data - 1),
                                    rd_last[:-1]))]
        with m.If(rd_issue):
            m.d.sync += [rd_left.eq(rd_left - 1), rd_addr.eq(rd_addr + 1), rd_col.eq(rd_col + 1)]
        # the buffer's read data is registered once more before anything uses
        # it: a BRAM's output is slow
        chan_q = Signal(8)
        m.d.sync += chan_q.eq(chan.r_data)
        m.d.comb += [rdq.w_en.eq(rd_inflight[-1]), rdq.w_data.eq(Cat(chan_q, rd_last[-1]))]

        # channel-side buffer port: corrector > reader > receive writer
        with m.If(corr_read | corr_write):
            m.d.comb += chan.addr.eq(corr_addr)
            with m.If(corr_write):
                m.d.comb += [chan.w_en.eq(1), chan.w_data.eq(corr_data)]
        with m.Elif(rd_issue):
            m.d.comb += chan.addr.eq(rd_addr)
        with m.Else():
            m.d.comb += chan.addr.eq(rx_addr)

        # program bytes: reader FIFO -> CRC -> (encoder) -> PHY
        src_valid = rdq.r_rdy
        src_byte = rdq.r_data[:8]
        src_last = rdq.r_data[8]
        with m.If(rescan):
            m.d.comb += [rdq.r_en.eq(1), crc_in.valid.eq(rdq.r_rdy), crc_in.data.eq(src_byte)]
            with m.If(rdq.r_rdy):
                m.d.sync += tx_left.eq(tx_left - 1)
        with m.Elif((tx_path == Path.BUF) | (tx_path == Path.BUF0)):
            if p.ecc:
                with m.If(use_ecc):
                    m.d.comb += [
                        enc.i.valid.eq(src_valid), enc.i.p.data.eq(src_byte), enc.i.p.last.eq(src_last),
                        rdq.r_en.eq(enc.i.ready),
                        phy.wdata.valid.eq(enc.o.valid), phy.wdata.payload.eq(enc.o.p.data),
                        enc.o.ready.eq(phy.wdata.ready),
                    ]
                with m.Else():
                    m.d.comb += [phy.wdata.valid.eq(src_valid), phy.wdata.payload.eq(src_byte),
                                 rdq.r_en.eq(phy.wdata.ready)]
            else:
                m.d.comb += [phy.wdata.valid.eq(src_valid), phy.wdata.payload.eq(src_byte),
                             rdq.r_en.eq(phy.wdata.ready)]
            m.d.comb += [crc_in.valid.eq(rdq.r_en & rdq.r_rdy), crc_in.data.eq(src_byte)]
        with m.Elif(tx_path == Path.PARITY):
            m.d.comb += [phy.wdata.valid.eq(parity.r_rdy), phy.wdata.payload.eq(parity.r_data),
                         parity.r_en.eq(phy.wdata.ready)]
        with m.If(phy.wdata.valid & phy.wdata.ready):
            m.d.sync += tx_left.eq(tx_left - 1)
        if p.ecc:
            # parity of every programmed codeword waits in the FIFO until 85h
            m.d.comb += [parity.w_en.eq(enc.parity.valid), parity.w_data.eq(enc.parity.p.data),
                         enc.parity.ready.eq(parity.w_rdy)]

        # read bytes: PHY -> status / parity FIFO / buffer + CRC + decoder
        rx = phy.rdata
        with m.Switch(rx_path):
            with m.Case(Path.STATUS):
                m.d.comb += rx.ready.eq(1)
                with m.If(rx.valid):
                    m.d.sync += rx_left.eq(rx_left - 1)
                    with m.If(rx_plane):
                        m.d.sync += status2.eq(rx.payload)
                    with m.Else():
                        m.d.sync += status.eq(rx.payload)
            with m.Case(Path.PARITY):
                m.d.comb += [parity.w_en.eq(rx.valid), parity.w_data.eq(rx.payload), rx.ready.eq(parity.w_rdy)]
                with m.If(rx.valid & parity.w_rdy):
                    m.d.sync += rx_left.eq(rx_left - 1)
            with m.Case(Path.BUF, Path.BUF0):
                dec_ok = Const(1)
                if p.ecc:
                    dec_ok = ~use_ecc | dec.i.ready
                port_free = ~corr_read & ~corr_write
                take = rx.valid & port_free & dec_ok & ~feed_par
                m.d.comb += [rx.ready.eq(port_free & dec_ok & ~feed_par),
                             crc_in.valid.eq(take), crc_in.data.eq(rx.payload)]
                with m.If(take):
                    m.d.comb += [chan.w_en.eq(1), chan.w_data.eq(rx.payload)]
                    m.d.sync += [rx_left.eq(rx_left - 1), rx_addr.eq(rx_addr + 1), rx_col.eq(rx_col + 1)]
                if p.ecc:
                    cw_done = ((rx_col % CW) == CW - 1) | (rx_col == prof.page_data - 1) | (rx_col == lay.user_bytes - 1)
                    with m.If(use_ecc):
                        m.d.comb += [dec.i.valid.eq(take), dec.i.p.data.eq(rx.payload), dec.i.p.last.eq(0)]
                        with m.If(take & cw_done):
                            m.d.sync += [feed_par.eq(1), feed_left.eq(P)]
                        with m.If(feed_par):
                            m.d.comb += [dec.i.valid.eq(parity.r_rdy), dec.i.p.data.eq(parity.r_data),
                                         dec.i.p.last.eq(feed_left == 1), parity.r_en.eq(dec.i.ready)]
                            with m.If(parity.r_rdy & dec.i.ready):
                                m.d.sync += feed_left.eq(feed_left - 1)
                                with m.If(feed_left == 1):
                                    m.d.sync += feed_par.eq(0)

        if p.multi_plane:
            self._learn_multi_plane(m, rx, rx_path, rx_col, d, cur_t, mp_pe_ok, mp_rd_ok)

        # corrections: read-modify-write of the slot, then account per codeword
        if p.ecc:
            cw_base = Signal.like(rx_addr)
            cw_len = Signal(16)
            m.d.comb += [
                cw_base.eq(Mux(corr_plane, slot2_base, slot_base) + Mux(fix_cw >= n_data_cw, lay.oob_col, fix_cw * CW)),
                cw_len.eq(Mux(fix_cw >= n_data_cw, lay.oob_bytes, CW)),
            ]
            # six cycles per corrected byte, every step from a register (timing closure):
            # address, read, the port's latency, hold (chan_q ^ mask), write;
            # the port is taken only in the read and write cycles
            m.d.comb += corr_busy.eq(corr_stage != 0)
            with m.Switch(corr_stage):
                with m.Case(0):
                    with m.If(dec.err.valid):
                        with m.If(dec.err.p.offset < cw_len):
                            m.d.sync += [corr_stage.eq(1), corr_addr.eq(cw_base + dec.err.p.offset),
                                         corr_mask.eq(dec.err.p.mask)]
                        with m.Else():
                            m.d.comb += dec.err.ready.eq(1)     # a parity bit: nothing to fix in the slot
                with m.Case(1):
                    m.d.comb += corr_read.eq(1)
                    m.d.sync += corr_stage.eq(2)
                for wait in range(2, CHAN_READ_LATENCY + 2):
                    with m.Case(wait):
                        m.d.sync += corr_stage.eq(wait + 1)
                with m.Case(CHAN_READ_LATENCY + 2):
                    m.d.sync += [corr_data.eq(chan_q ^ corr_mask), corr_stage.eq(CHAN_READ_LATENCY + 3)]
                with m.Case(CHAN_READ_LATENCY + 3):
                    m.d.comb += [corr_write.eq(1), dec.err.ready.eq(1)]
                    m.d.sync += corr_stage.eq(0)
            m.d.comb += dec.res.ready.eq(~corr_busy & ~dec.err.valid)
            with m.If(dec.res.valid & dec.res.ready):
                r = dec.res.p
                m.d.sync += [
                    fix_cw.eq(fix_cw + 1), res_count.eq(res_count + 1),
                    ecc_total.eq(ecc_total + r.corrected),
                    ecc_bad.eq(ecc_bad | (r.uncorrectable & ~r.erased)),
                    ecc_erased.eq(ecc_erased & r.erased),
                ]
                with m.If(r.corrected > ecc_max):
                    m.d.sync += ecc_max.eq(r.corrected)

        # -- the bus engine --------------------------------------------------------------
        eligible_ready = pending & phy.ready
        eligible_start = q_rdy & ~started
        # an operation whose first phase is a command and an address (READ, ERASE, COPYBACK) starts
        # before anything else: it costs the bus well under a microsecond and sets its die working
        # through tR or tBERS while the bus moves another die's page.  Started after a page transfer
        # instead, a read's tR would leave the bus idle after every page.
        short_first = Cat(Mux(q_rdy[t], self.short_first_phase(queues[t].r_data), 0) for t in range(W))
        eligible_short = eligible_start & short_first
        last_t = Signal.like(cur_t)
        g_ready, any_ready = round_robin(m, eligible_ready, last_t, W)
        g_start, any_start = round_robin(m, eligible_start, last_t, W)
        g_short, any_short = round_robin(m, eligible_short, last_t, W)
        m.d.comb += self.busy.eq(q_rdy.any() | (in_valid & (verdict == NandResult.OK)))

        ecc_done = Signal()
        m.d.comb += ecc_done.eq(~use_ecc | (d.opcode != NandOp.READ) | ((res_count == n_cw) & ~corr_busy & ~feed_par))
        if not p.ecc:
            m.d.comb += ecc_done.eq(1)

        cpl = Signal(layouts.NAND_CPL)
        crc_saved = Array(Signal(32, name=f"crc_saved{t}") for t in range(W))
        is_pe = (d.opcode == NandOp.PROGRAM) | (d.opcode == NandOp.ERASE) | (d.opcode == NandOp.COPYBACK)
        ecc_read = use_ecc & (d.opcode == NandOp.READ)
        # multi-plane READ: ecc_bad / ecc_erased are the partner plane's, bad_1 / erased_1 the first's
        bad_first = Mux(mp, bad_1, ecc_bad)
        erased_first = Mux(mp, erased_1, ecc_erased)
        fail = status[spec.OnfiStatus.FAIL] | status2[spec.OnfiStatus.FAIL]
        result = Mux(is_pe & fail, NandResult.FAIL,
                     Mux(ecc_bad | bad_first, NandResult.UNCORRECTABLE,
                         Mux(ecc_erased & erased_first & ecc_read, NandResult.ERASED, NandResult.OK)))
        m.d.comb += [
            cpl.tag.eq(d.tag), cpl.result.eq(result), cpl.channel.eq(self.channel_index),
            cpl.target.eq(d.target), cpl.nand_status.eq(status), cpl.nand_status2.eq(status2),
            cpl.ecc_max.eq(ecc_max),
            cpl.flags.uncorrectable.eq(bad_first), cpl.flags.erased.eq(erased_first & ecc_read),
            cpl.flags.uncorrectable2.eq(mp & ecc_bad), cpl.flags.erased2.eq(mp & ecc_erased & ecc_read),
            cpl.ecc_corrected.eq(ecc_total),
        ]
        with m.Switch(d.opcode):
            with m.Case(NandOp.READ, NandOp.READ_ID, NandOp.READ_PARAM):
                m.d.comb += cpl.crc.eq(crc.crc)
            with m.Case(NandOp.PROGRAM, NandOp.SET_FEATURES):
                m.d.comb += cpl.crc.eq(crc_saved[cur_t])

        def start_phase(t):
            # a phase owns the status, ECC and CRC state; only a program's CRC
            # outlives its phase (saved per target at the busy period)
            m.d.sync += [cur_t.eq(t), last_t.eq(t), d.eq(q_data[t]), ph.eq(phase[t]),
                         status.eq(0), status2.eq(0), res_count.eq(0), ecc_total.eq(0), ecc_max.eq(0),
                         ecc_bad.eq(0), ecc_erased.eq(1), bad_1.eq(0), erased_1.eq(1)]
            m.d.comb += crc_in.start.eq(1)

        with m.FSM():
            with m.State("PICK"):
                with m.If(any_short):
                    start_phase(g_short)
                    m.d.sync += started.bit_select(g_short, 1).eq(1)
                    m.next = "LOAD"
                with m.Elif(any_ready):
                    start_phase(g_ready)
                    m.d.sync += pending.bit_select(g_ready, 1).eq(0)
                    m.next = "LOAD"
                with m.Elif(any_start):
                    start_phase(g_start)
                    m.d.sync += started.bit_select(g_start, 1).eq(1)
                    m.next = "LOAD"
            with m.State("LOAD"):
                m.d.sync += use_ecc.eq(self.uses_ecc(d))
                m.next = "ENTRY"
            with m.State("ENTRY"):
                m.d.sync += [pc.eq(entry), st.eq(rom[entry]), fix_cw.eq(cw_first)]
                m.next = "STEP"
            with m.State("STEP"):
                # multi-plane READ: the partner plane's bytes wait until the first plane's
                # codewords are decoded and corrected (the corrector addresses one slot)
                plane_wait = Signal()
                if p.ecc:
                    m.d.comb += plane_wait.eq(st.plane & (st.kind == PhyKind.READ) & (st.path == Path.BUF) & use_ecc
                                              & ~((res_count == n_cw) & ~corr_busy & ~feed_par))
                m.d.comb += phy.op.valid.eq(~plane_wait)
                with m.If(phy.op.ready & ~plane_wait):
                    with m.If(st.kind == PhyKind.WRITE):
                        m.d.sync += [tx_path.eq(st.path), tx_left.eq(count)]
                        with m.If(st.path == Path.BUF):
                            m.d.sync += [rd_left.eq(count), rd_addr.eq(Mux(st.plane, col_addr2, col_addr)),
                                         rd_col.eq(d.column)]
                        with m.If(st.path == Path.BUF0):
                            m.d.sync += [rd_left.eq(count), rd_addr.eq(slot_base), rd_col.eq(0)]
                        m.next = "DATA"
                    with m.Elif(st.kind == PhyKind.READ):
                        m.d.sync += [rx_path.eq(st.path), rx_left.eq(count), rx_plane.eq(st.plane),
                                     rx_addr.eq(Mux(st.path == Path.BUF, Mux(st.plane, col_addr2, col_addr),
                                                    slot_base)),
                                     rx_col.eq(Mux(st.path == Path.BUF, d.column, 0))]
                        with m.If(((st.path == Path.BUF) | (st.path == Path.BUF0)) & ~st.plane):
                            m.d.comb += crc_in.start.eq(1)      # multi-plane: one CRC over both slots
                        with m.If((st.path == Path.BUF) & st.plane):
                            # the partner plane's ECC starts afresh; totals carry on
                            m.d.sync += [bad_1.eq(ecc_bad), erased_1.eq(ecc_erased), ecc_bad.eq(0),
                                         ecc_erased.eq(1), res_count.eq(0), fix_cw.eq(cw_first)]
                        with m.If(st.path == Path.BUF):
                            m.d.sync += corr_plane.eq(st.plane)
                        m.next = "DATA"
                    with m.Else():
                        m.next = "NEXT"
            with m.State("DATA"):
                with m.If((tx_left == 0) & (rx_left == 0) & ~feed_par):
                    m.d.sync += [tx_path.eq(Path.NONE), rx_path.eq(Path.NONE)]
                    m.next = "NEXT"
            with m.State("NEXT"):
                # the PHY takes an operation before executing it: a phase ends
                # (and R/B# means something) only once the PHY is idle
                with m.If((st.end != End.NEXT) & ~phy.idle):
                    pass
                with m.Elif(st.end == End.NEXT):
                    m.d.sync += [pc.eq(pc + 1), st.eq(rom_next[pc])]
                    m.next = "STEP"
                with m.Elif(st.end == End.PEND):
                    m.d.sync += [pending.bit_select(cur_t, 1).eq(1), phase[cur_t].eq(ph + 1)]
                    with m.If(ph == 0):
                        m.d.sync += crc_saved[cur_t].eq(crc.crc)
                    m.next = "PICK"
                with m.Else():
                    m.next = "FINISH"
            with m.State("FINISH"):
                with m.If(ecc_done & phy.idle):
                    with m.If((ecc_total != 0) & (d.opcode == NandOp.READ)):
                        m.d.comb += crc_in.start.eq(1)
                        m.d.sync += [rescan.eq(1), tx_left.eq(d.length), rd_left.eq(d.length),
                                     rd_addr.eq(col_addr), rd_col.eq(d.column), rescan2.eq(0)]
                        m.next = "RESCAN"
                    with m.Else():
                        m.next = "COMPLETE"
            with m.State("RESCAN"):
                with m.If(tx_left == 0):
                    with m.If(mp & ~rescan2):
                        m.d.sync += [rescan2.eq(1), tx_left.eq(d.length), rd_left.eq(d.length),
                                     rd_addr.eq(col_addr2), rd_col.eq(d.column)]
                    with m.Else():
                        m.d.sync += rescan.eq(0)
                        m.next = "COMPLETE"
            with m.State("COMPLETE"):
                m.d.comb += engine_cpl.eq(1)
                with m.If(cplq.w_rdy):
                    m.d.comb += [cplq.w_en.eq(1), cplq.w_data.eq(cpl)]
                    for t, q in enumerate(queues):
                        with m.If(cur_t == t):
                            m.d.comb += q.r_en.eq(1)
                    m.d.sync += [started.bit_select(cur_t, 1).eq(0), phase[cur_t].eq(0)]
                    m.next = "PICK"
        return m
