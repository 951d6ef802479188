"""Binary BCH error correction for NAND pages: an inline encoder and a pipelined
syndrome / Berlekamp-Massey / Chien decoder, bit-compatible with the Linux
kernel's BCH library (``bchlib``).

Why BCH, and what the numbers mean
==================================

NAND flash returns pages with a few flipped bits; how many grows with wear and
retention.  The controller therefore stores, in each page's spare area, parity
for every *codeword* of ``k`` data bytes (default 512) that lets it correct up
to ``t`` flipped bits per codeword (default 8).  A binary BCH code over
GF(2^m) does this with ``m*t`` parity bits: the smallest field whose
``2^m - 1`` bit positions cover a codeword is GF(2^13) for 512 data bytes
(4096 + 104 bits < 8191), so t = 8 costs 104 bits = 13 parity bytes per 512
data bytes -- the classic "8 bits per 512 bytes" of SLC NAND datasheets.

The code is *narrow-sense*: a word ``c(x)`` is a codeword when
``c(alpha^j) = 0`` for ``j = 1..2t``.  The generator ``g(x)`` is the least
common multiple of the minimal polynomials of ``alpha, alpha^3, ...,
alpha^(2t-1)`` (the even powers come free in characteristic 2), computed in
Python at elaboration (:mod:`rtl.ecc.gf`).

Bit and byte order (the contract with bchlib and the channel controller)
------------------------------------------------------------------------

Exactly the Linux ``lib/bch.c`` conventions with ``swap_bits=False``: the data
bytes are a polynomial whose highest coefficient is bit 7 of byte 0 (bytes in
order, each MSB first); the parity is ``data(x) * x^(m*t) mod g(x)``, written
MSB first into ``ceil(m*t/8)`` bytes, the unused low bits of the last parity
byte zero.  A codeword may be *shorter* than ``k`` (leading zero bytes do not
change a polynomial), so one engine also protects e.g. the 40-byte OOB record.

The encoder
-----------

Systematic encoding is polynomial division: an ``m*t``-bit LFSR with the taps
of ``g(x)``.  Eight LFSR steps per cycle are one GF(2)-linear map of (state,
byte), derived at elaboration by running the serial LFSR symbolically; each
next-state bit is an XOR of at most ``m*t + 8`` inputs (in practice ~40).
Data bytes pass straight through (``o`` is ``i``, combinationally); after the
byte flagged ``last`` the remainder moves to a parity shift register and
drains on the ``parity`` stream while the next codeword's data already flows,
so the data path never stalls (unless parity is not taken before the *next*
codeword ends).

The decoder: three stages, one codeword each, handed over by registers
-----------------------------------------------------------------------

1. **Syndromes**, 8 bits/cycle while the codeword streams in.  Only the odd
   syndromes are accumulated (``S_2j = S_j^2``): ``S_j <- S_j * alpha^(8j) +
   sum_b bit_b * alpha^(j*b)``, again one linear map per syndrome.  The pad
   bits of the last parity byte are forced to zero and counted as the lowest
   polynomial degrees: every position becomes byte-aligned (bit ``b`` of byte
   ``B`` of a ``K``-byte codeword is degree ``8*(K-1-B)+b``) and ``c(x)x^pad``
   is still a codeword, so nothing else needs to know about the pad.  The same
   stage counts zero bits, for erased-page detection (below).
2. **Berlekamp-Massey**, the *simplified inversion-free* variant for binary
   codes (SiBM): the iBM of Sarwate & Shanbhag needs no GF inversion, and in
   a binary code every second discrepancy is zero, so only ``t`` iterations
   run, each folding the skipped step into an extra shift of ``b(x)``::

       delta  = sum_i lambda_i * S_(2r+1-i)
       lambda = gamma*lambda + delta * x * b
       if delta != 0 and k >= 0:  b = x*lambda_old, gamma = delta, k = -k
       else:                      b = x^2 * b,      k = k + 2

   One GF multiplier does every product, one a cycle, with registered
   operands and product: per iteration the ``t+1`` products ``lambda_j*w_j``
   (their sum is delta), then ``gamma*lambda_j`` and ``delta*b_(j-1)`` for
   ``j = t..0`` (the new ``lambda_j`` is their sum), each used two cycles
   after its issue.  BM takes ``t(3t+5)`` cycles (232 for t = 8), less than
   a data codeword's ``K`` input cycles, so it still keeps up with the bus;
   ``t+1`` parallel multipliers would be a third of the decoder for no
   throughput.  An all-zero syndrome skips it.
3. **Chien search**, 8 roots per cycle, one byte per cycle, scanning from the
   *last* byte (degree 0) towards the first: ``L_i <- L_i * alpha^(-8i)``,
   and bit ``b`` of the current byte is in error when ``sum_i L_i *
   alpha^(-ib) = 0``.  Two pipeline registers cut the XOR tree from the zero
   test and the root counting.  Found bytes (offset + 8-bit mask, several
   errors in one byte merge into one entry) go into a small FIFO.  At the end
   the decoder checks that the number of roots equals ``deg(Lambda)`` and
   that no root fell on a pad bit; otherwise the codeword is
   **uncorrectable** and the FIFO is discarded -- corrections are only ever
   released for a codeword that decoded consistently, never a partial or
   silent miscorrection of the kinds this check can see.

Outputs, and how a channel controller uses them
-----------------------------------------------

The read path streams page data into a BRAM page buffer *and* into the
decoder.  Per codeword the decoder emits, in order, zero or more ``err``
entries ``(offset, mask)`` -- XOR ``mask`` into byte ``offset`` of the
codeword (offsets at or beyond the data length are parity bytes; a
controller can ignore them) -- and then exactly one ``res`` entry
``(corrected, uncorrectable, erased)``.  Applying the corrections is a
read-modify-write of at most ``t`` bytes through the buffer's memory port,
which the controller owns; the decoder needs no buffer of its own.
``erased`` is set when the codeword has at most ``t`` zero bits: an erased
(all-FFh) page is not a codeword, so the controller should report "erased"
rather than "uncorrectable" when both are set (as Linux's
``nand_check_erased_ecc_chunk`` does).

Input bytes pass one register before stage 1 (the source is usually a
FIFO or a mux).  Latency, in cycles after the last byte is accepted: clean
codeword 4; codeword with errors about ``t(3t+5) + K + 16`` (K = codeword bytes;
773 for the default code), dominated by the Chien scan.  Throughput: one byte per cycle in, one
codeword per ``max(K, Chien)`` cycles; see docs/ecc.md and docs/results/ecc_bench.md.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, ClockDomain, ClockSignal, Const, DomainRenamer, Module, Mux, ResetSignal, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .bch_model import BchCode
from .gf import gf_mul, lin

__all__ = ["BchCode", "BchEncoder", "BchDecoder", "byte_layout", "err_layout", "res_layout",
           "default_code"]


def default_code() -> BchCode:
    """The code of :data:`atomflash.spec.ECC` (t = 8 per 512 bytes, GF(2^13))."""
    from atomflash import spec

    e = spec.ECC
    code = BchCode(e.m, e.t, e.codeword, e.prim_poly)
    assert code.parity_bytes == e.parity_bytes
    return code


def byte_layout() -> data.StructLayout:
    """A byte of a stream; ``last`` marks the final byte of a codeword."""
    return data.StructLayout({"data": 8, "last": 1})


def err_layout(code: BchCode) -> data.StructLayout:
    return data.StructLayout({"offset": range(code.max_bytes), "mask": 8})


def res_layout(code: BchCode) -> data.StructLayout:
    return data.StructLayout({"corrected": range(code.t + 1), "uncorrectable": 1, "erased": 1})


def _lfsr8_cols(code: BchCode) -> list[int]:
    """Eight LFSR steps for a state whose top byte XOR the input byte is ``f``
    and whose other bits are zero: next = (state << 8) ^ T(f), T linear in f.
    Column j is T(1 << j) (the table-driven CRC update, as an XOR matrix)."""
    nb, taps = code.ecc_bits, code.gen ^ (1 << code.ecc_bits)
    cols = []
    for j in range(8):
        r = 1 << (nb - 8 + j)
        for _ in range(8):
            fb = r >> (nb - 1)
            r = (r << 1) & ((1 << nb) - 1)
            if fb:
                r ^= taps
        cols.append(r)
    return cols


class BchEncoder(wiring.Component):
    """Inline BCH encoder.

    Ports
    -----
    i : In(stream of :func:`byte_layout`)
        Data bytes of consecutive codewords; ``last`` on each codeword's final
        data byte (a codeword also ends after ``code.data_bytes`` bytes).
    o : Out(stream of :func:`byte_layout`)
        The same bytes, passed through combinationally (``o.valid`` follows
        ``i.valid``, ``i.ready`` follows ``o.ready``).
    parity : Out(stream of :func:`byte_layout`)
        ``code.parity_bytes`` parity bytes per codeword, in bchlib order,
        ``last`` on the final one; starts the cycle after the codeword's last
        data byte.  ``i``/``o`` stall only on a codeword's last byte while the
        previous codeword's parity has not drained yet.  No valid depends on
        a ready, so the three streams may be wired in any arrangement.
    """

    def __init__(self, code: BchCode | None = None):
        self.code = code or default_code()
        super().__init__({
            "i": In(stream.Signature(byte_layout())),
            "o": Out(stream.Signature(byte_layout())),
            "parity": Out(stream.Signature(byte_layout())),
        })

    def elaborate(self, platform):
        m = Module()
        code = self.code
        nb, P = code.ecc_bits, code.parity_bytes

        lfsr = Signal(nb)
        count = Signal(range(code.data_bytes))
        at_last = Signal(init=code.data_bytes == 1)   # count == data_bytes - 1, registered (timing closure)
        par = Signal(8 * P)
        par_left = Signal(range(P + 1))

        assert nb >= 8
        fbyte = lfsr[nb - 8:] ^ self.i.p.data
        lfsr_next = (lfsr << 8)[:nb] ^ lin(_lfsr8_cols(code), fbyte, nb)
        end = self.i.p.last | at_last
        # o.valid must not depend on any ready (parity.ready included), so a
        # codeword's last byte waits for the previous parity to be fully drained
        gate = ~end | (par_left == 0)

        m.d.comb += [
            self.o.p.eq(self.i.p),
            self.o.p.last.eq(end),
            self.o.valid.eq(self.i.valid & gate),
            self.i.ready.eq(self.o.ready & gate),
            self.parity.p.data.eq(par[-8:]),
            self.parity.p.last.eq(par_left == 1),
            self.parity.valid.eq(par_left != 0),
        ]
        with m.If(self.parity.valid & self.parity.ready):
            m.d.sync += [par.eq(par << 8), par_left.eq(par_left - 1)]
        with m.If(self.i.valid & self.i.ready):
            with m.If(end):
                m.d.sync += [lfsr.eq(0), count.eq(0), at_last.eq(code.data_bytes == 1),
                             par.eq(lfsr_next << code.pad), par_left.eq(P)]
            with m.Else():
                m.d.sync += [lfsr.eq(lfsr_next), count.eq(count + 1),
                             at_last.eq(count == code.data_bytes - 2)]
        return m


class BchDecoder(wiring.Component):
    """Pipelined BCH decoder: syndromes (streaming), SiBM, Chien search.

    Ports
    -----
    i : In(stream of :func:`byte_layout`)
        Codewords: the data bytes then the ``code.parity_bytes`` parity bytes,
        ``last`` on the final parity byte (a codeword also ends after
        ``code.max_bytes`` bytes).  Accepts one byte per cycle; stalls only
        when a codeword ends while the previous one is still in BM.
    err : Out(stream of :func:`err_layout`)
        Corrections of a correctable codeword: XOR ``mask`` (bit b = value
        1<<b) into byte ``offset`` of data||parity.  Descending offset order;
        one entry per byte in error; none for an uncorrectable codeword.
    res : Out(stream of :func:`res_layout`)
        One per codeword, in input order, after its ``err`` entries:
        ``corrected`` bit errors, ``uncorrectable`` (more than t errors
        detected; ``corrected`` is 0 then), ``erased`` (at most t zero bits).
    busy : Out(1)
        A codeword is somewhere in the pipeline (or the last one's results
        are still settling): with ``i.valid`` low, the next clock edge
        changes no register.

    ``sim_gate_idle``: clock the decoder only while ``busy`` or ``i.valid``
    (see :meth:`_gated`).  For simulation speed only: it gates a clock with
    logic, which an FPGA build must not do.
    """

    def __init__(self, code: BchCode | None = None, *, sim_gate_idle: bool = False):
        self.code = code or default_code()
        self.sim_gate_idle = sim_gate_idle
        super().__init__({
            "i": In(stream.Signature(byte_layout())),
            "err": Out(stream.Signature(err_layout(self.code))),
            "res": Out(stream.Signature(res_layout(self.code))),
            "busy": Out(1),
        })

    def _gated(self):
        """The decoder in a clock domain of its own whose clock runs only
        while it has work.  Verilator evaluates a flip-flop, and the logic
        feeding it, only on its clock's edges; ungated, an idle decoder's
        syndrome, Berlekamp-Massey and Chien logic (most of a NAND channel)
        was evaluated every cycle and took about half of the SoC
        simulation's time.  The enable is sampled on the falling edge, so
        the gated clock has no glitches, and it stays up for three cycles
        after ``busy`` falls; while it is low no register would have
        changed anyway, so the ports behave exactly as ungated."""
        m = Module()
        inner = BchDecoder(self.code)
        m.submodules.inner = DomainRenamer("bchdec")(inner)
        wiring.connect(m, wiring.flipped(self.i), inner.i)
        wiring.connect(m, inner.err, wiring.flipped(self.err))
        wiring.connect(m, inner.res, wiring.flipped(self.res))
        m.domains.bchdec = gated = ClockDomain("bchdec", local=True)
        m.domains.bchdec_en = sample = ClockDomain("bchdec_en", clk_edge="neg", local=True)
        settle = Signal(3)
        enable = Signal(init=1)
        m.d.sync += settle.eq(Cat(inner.busy, settle[:-1]))
        m.d.comb += [self.busy.eq(inner.busy | (settle != 0)),
                     sample.clk.eq(ClockSignal()), sample.rst.eq(ResetSignal()),
                     gated.clk.eq(ClockSignal() & enable), gated.rst.eq(ResetSignal())]
        m.d.bchdec_en += enable.eq(self.i.valid | self.busy)
        return m

    def elaborate(self, platform):
        if self.sim_gate_idle:
            return self._gated()
        m = Module()
        code = self.code
        gf, t, mw = code.gf, code.t, code.m
        K = code.max_bytes
        odd = list(range(1, 2 * t, 2))

        # ---- stage 0: input register ----------------------------------------------
        # The bytes usually come from a FIFO or a mux in the controller; the
        # syndrome XOR trees and the zero count start from a flip-flop (timing closure).
        in_valid = Signal()
        in_data = Signal(8)
        in_last = Signal()
        s1_ready = Signal()
        m.d.comb += self.i.ready.eq(~in_valid | s1_ready)
        with m.If(self.i.ready):
            m.d.sync += [in_valid.eq(self.i.valid), in_data.eq(self.i.p.data), in_last.eq(self.i.p.last)]

        # ---- stage 1: odd syndromes, 8 bits per cycle --------------------------
        acc = [Signal(mw, name=f"acc{j}") for j in odd]
        count = Signal(range(K + 1))
        at_last = Signal(init=K == 1)        # count == K - 1, registered (timing closure)
        zeros = Signal(range(t + 2))
        end = in_last | at_last
        padmask = 0xFF & ~((1 << code.pad) - 1)
        byte = Signal(8)
        m.d.comb += byte.eq(Mux(end, in_data & padmask, in_data))
        zbits = Signal(8)
        m.d.comb += zbits.eq(~in_data & Mux(end, padmask, 0xFF))
        zpop = sum(zbits[b] for b in range(8))
        zeros_next = Mux(zeros + zpop > t, t + 1, zeros + zpop)
        acc_next = []
        for j, a in zip(odd, acc):
            cols = gf.mul_cols(gf.alpha(8 * j)) + [gf.alpha(j * b) for b in range(8)]
            acc_next.append(lin(cols, Cat(a, byte), mw))

        hold = [Signal(mw, name=f"hold{j}") for j in odd]
        hold_len = Signal(range(K + 1))
        hold_erased = Signal()
        hold_valid = Signal()
        bm_take = Signal()

        m.d.comb += s1_ready.eq(~hold_valid | bm_take)
        with m.If(bm_take):
            m.d.sync += hold_valid.eq(0)
        with m.If(in_valid & s1_ready):
            with m.If(end):
                m.d.sync += [h.eq(n) for h, n in zip(hold, acc_next)]
                m.d.sync += [hold_len.eq(count + 1), hold_erased.eq(zeros_next <= t),
                             hold_valid.eq(1), count.eq(0), at_last.eq(K == 1), zeros.eq(0)]
                m.d.sync += [a.eq(0) for a in acc]
            with m.Else():
                m.d.sync += [a.eq(n) for a, n in zip(acc, acc_next)]
                m.d.sync += [count.eq(count + 1), at_last.eq(count == K - 2), zeros.eq(zeros_next)]

        # ---- stage 2: simplified inversion-free Berlekamp-Massey ---------------
        # all syndromes S_1..S_(2t-1) from the odd ones (squaring is linear)
        def syn(j, src):
            e = 0
            while j % 2 == 0:
                j //= 2
                e += 1
            cols = [gf.pow(gf.alpha(b), 1 << e) for b in range(mw)]
            return lin(cols, src[odd.index(j)], mw)

        lam = Array(Signal(mw, name=f"lam{i}", init=int(i == 0)) for i in range(t + 1))
        bpl = Array(Signal(mw, name=f"b{i}") for i in range(t + 1))
        tmp = Array(Signal(mw, name=f"tmp{i}") for i in range(t + 1))
        win = Array(Signal(mw, name=f"w{i}") for i in range(t + 1))    # w_i = S_(2r+1-i)
        que = [Signal(mw, name=f"q{j}") for j in range(2, 2 * t)]     # S_(2r+2) ...
        gamma = Signal(mw)
        delta = Signal(mw)
        kk = Signal(range(-2 * t - 2, 2 * t + 3))
        rnd = Signal(range(t + 1))
        bm_len = Signal(range(K + 1))
        bm_erased = Signal()
        bm_done = Signal()
        chien_take = Signal()

        # One GF multiplier, its operands and product registers (timing closure), fed one product a
        # cycle.  A round issues lam_j * w_j (j = 0..t; their sum is delta), gamma * lam_j and
        # delta * b_(j-1) (j = t..0, the new lam_j their sum); each product is used two cycles after
        # its issue, tagged with its (step, j).  Descending j lets lam and b be updated in place:
        # b_j takes lam_(j-1) or b_(j-2), neither written yet.
        DOT, GAMMA, DELTA = 0, 1, 2
        a_op, b_op, prod = Signal(mw), Signal(mw), Signal(mw)
        m.d.sync += prod.eq(gf_mul(gf, a_op, b_op))
        iss_step, iss_j, iss_on = Signal(2), Signal(range(t + 1)), Signal()     # the issuer
        op_step, op_j, op_on = Signal(2), Signal(range(t + 1)), Signal()        # in a_op * b_op
        pr_step, pr_j, pr_on = Signal(2), Signal(range(t + 1)), Signal()        # in prod
        m.d.sync += [op_step.eq(iss_step), op_j.eq(iss_j), op_on.eq(iss_on),
                     pr_step.eq(op_step), pr_j.eq(op_j), pr_on.eq(op_on)]
        b_below = Mux(iss_j == 0, 0, bpl[iss_j - 1])
        with m.Switch(iss_step):
            with m.Case(DOT):
                m.d.sync += [a_op.eq(lam[iss_j]), b_op.eq(win[iss_j])]
            with m.Case(GAMMA):
                m.d.sync += [a_op.eq(lam[iss_j]), b_op.eq(gamma)]
            with m.Default():
                m.d.sync += [a_op.eq(b_below), b_op.eq(delta)]
        with m.If(iss_on):
            with m.Switch(iss_step):
                with m.Case(DOT):
                    with m.If(iss_j == t):
                        m.d.sync += [iss_step.eq(GAMMA)]
                    with m.Else():
                        m.d.sync += iss_j.eq(iss_j + 1)
                with m.Default():
                    with m.If(iss_j == 0):
                        m.d.sync += [iss_step.eq(iss_step + 1), iss_j.eq(t)]
                        with m.If(iss_step == DELTA):
                            m.d.sync += [iss_on.eq(0), iss_step.eq(DOT), iss_j.eq(0)]
                    with m.Else():
                        m.d.sync += iss_j.eq(iss_j - 1)
        swap = (delta != 0) & (kk >= 0)
        round_end = Signal()

        with m.FSM(name="bm") as bm_fsm:
            with m.State("IDLE"):
                m.d.comb += bm_take.eq(hold_valid)
                with m.If(hold_valid):
                    m.d.sync += [
                        *(lam[i].eq(int(i == 0)) for i in range(t + 1)),
                        *(bpl[i].eq(int(i == 0)) for i in range(t + 1)),
                        *(win[i].eq(syn(1, hold) if i == 0 else 0) for i in range(t + 1)),
                        *(q.eq(syn(j, hold)) for j, q in zip(range(2, 2 * t), que)),
                        gamma.eq(1), kk.eq(0), rnd.eq(0),
                        bm_len.eq(hold_len), bm_erased.eq(hold_erased),
                    ]
                    with m.If(Cat(*hold) == 0):
                        m.next = "DONE"
                    with m.Else():
                        m.d.sync += [iss_on.eq(1), iss_step.eq(DOT), iss_j.eq(0)]
                        m.next = "RUN"
            with m.State("RUN"):
                with m.If(pr_on):
                    with m.Switch(pr_step):
                        with m.Case(DOT):
                            m.d.sync += delta.eq(Mux(pr_j == 0, prod, delta ^ prod))
                        with m.Case(GAMMA):
                            m.d.sync += tmp[pr_j].eq(prod)
                        with m.Default():
                            m.d.sync += lam[pr_j].eq(tmp[pr_j] ^ prod)
                            lam_below = Mux(pr_j == 0, 0, lam[pr_j - 1])
                            b_two_below = Mux(pr_j < 2, 0, bpl[pr_j - 2])
                            m.d.sync += bpl[pr_j].eq(Mux(swap, lam_below, b_two_below))
                            m.d.comb += round_end.eq(pr_j == 0)
                with m.If(round_end):
                    with m.If(swap):
                        m.d.sync += [gamma.eq(delta), kk.eq(-kk)]
                    with m.Else():
                        m.d.sync += kk.eq(kk + 2)
                    # slide the syndrome window by two
                    m.d.sync += [*(win[i].eq(win[i - 2]) for i in range(2, t + 1))]
                    if que:
                        m.d.sync += [win[1].eq(que[0]), win[0].eq(que[1])]
                        m.d.sync += [que[j].eq(que[j + 2]) for j in range(len(que) - 2)]
                    m.d.sync += rnd.eq(rnd + 1)
                    with m.If(rnd == t - 1):
                        m.next = "DONE"
                    with m.Else():
                        m.d.sync += iss_on.eq(1)
            with m.State("DONE"):
                m.d.comb += bm_done.eq(1)
                with m.If(chien_take):
                    m.next = "IDLE"

        # ---- stage 3: Chien search, 8 roots per cycle --------------------------
        L = [Signal(mw, name=f"L{i}") for i in range(t + 1)]
        deg = Signal(range(t + 1))
        ch_len = Signal(range(K + 1))
        ch_erased = Signal()
        step = Signal(range(K + 1))          # bytes scanned
        # pipeline stage A: evaluations; stage B: root mask
        ev = [Signal(mw, name=f"ev{b}") for b in range(8)]
        ev_valid = Signal()
        ev_first = Signal()
        ev_off = Signal(range(K))
        mk = Signal(8)
        mk_valid = Signal()
        mk_off = Signal(range(K))
        roots = Signal(range(8 * K + 1))
        pad_hit = Signal()
        ok = Signal()
        drain = Signal(range(4))

        locs = fifo.SyncFIFO(width=len(self.err.p.as_value()), depth=t)
        m.submodules.locs = locs

        lam_deg = Const(0, range(t + 1))
        for i in range(1, t + 1):
            lam_deg = Mux(lam[i] != 0, i, lam_deg)

        for b in range(8):
            terms = [lin(gf.mul_cols(gf.alpha(-i * b)), L[i], mw) for i in range(t + 1)]
            m.d.sync += ev[b].eq(_xor_list(terms))

        pad_bits = (1 << code.pad) - 1
        m.d.sync += [
            mk.eq(Cat(*(ev[b] == 0 for b in range(8))) & Mux(ev_first, 0xFF & ~pad_bits, 0xFF)),
            mk_valid.eq(ev_valid), mk_off.eq(ev_off),
        ]
        if code.pad:
            # a root on a pad bit is a miscorrection: flag the codeword
            with m.If(ev_valid & ev_first & (Cat(*(ev[b] == 0 for b in range(code.pad))) != 0)):
                m.d.sync += pad_hit.eq(1)
        m.d.comb += [
            locs.w_data.eq(Cat(mk_off, mk)),
            locs.w_en.eq(mk_valid & (mk != 0)),
        ]
        with m.If(mk_valid):
            m.d.sync += roots.eq(roots + sum(mk[b] for b in range(8)))

        m.d.sync += ev_valid.eq(0)
        m.d.comb += [self.err.p.as_value().eq(locs.r_data)]
        with m.FSM(name="chien") as chien_fsm:
            with m.State("IDLE"):
                m.d.comb += chien_take.eq(bm_done)
                with m.If(bm_done):
                    m.d.sync += [*(x.eq(l) for x, l in zip(L, lam)), deg.eq(lam_deg),
                                 ch_len.eq(bm_len), ch_erased.eq(bm_erased), step.eq(0),
                                 roots.eq(0), pad_hit.eq(0)]
                    with m.If(lam_deg == 0):
                        m.d.sync += ok.eq(1)
                        m.next = "RESULT"
                    with m.Else():
                        m.next = "SCAN"
            with m.State("SCAN"):
                m.d.sync += [ev_valid.eq(1), ev_first.eq(step == 0), ev_off.eq(ch_len - 1 - step),
                             step.eq(step + 1)]
                m.d.sync += [x.eq(lin(gf.mul_cols(gf.alpha(-8 * i)), x, mw)) for i, x in enumerate(L)]
                with m.If(step == ch_len - 1):
                    m.d.sync += drain.eq(0)
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == 2):
                    m.d.sync += ok.eq((roots == deg) & ~pad_hit)
                    m.next = "EMIT"
            with m.State("EMIT"):
                m.d.comb += [self.err.valid.eq(ok & locs.r_rdy),
                             locs.r_en.eq(Mux(ok, self.err.ready, 1))]
                with m.If(~locs.r_rdy):
                    m.next = "RESULT"
            with m.State("RESULT"):
                m.d.comb += [self.res.valid.eq(1),
                             self.res.p.corrected.eq(Mux(ok, deg, 0)),
                             self.res.p.uncorrectable.eq(~ok),
                             self.res.p.erased.eq(ch_erased)]
                with m.If(self.res.ready):
                    m.next = "IDLE"
        m.d.comb += self.busy.eq(in_valid | hold_valid | ~bm_fsm.ongoing("IDLE") | ~chien_fsm.ongoing("IDLE")
                                 | ev_valid | mk_valid)
        return m


def _xor_list(vals):
    out = vals[0]
    for v in vals[1:]:
        out = out ^ v
    return out
