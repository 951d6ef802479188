"""A true random 128-bit key, drawn fresh at every boot, with NIST SP 800-90B health tests.

The append tokens' MAC key must be one nobody can know: not the host, not the
firmware, not whoever built the bitstream.  :class:`Trng` makes it in gateware
and hands it only to gateware (its ``key`` port); the firmware starts a draw
and reads status (``ready``, ``alarm``, counters), never the key nor the raw
bits it came from.

The noise source
----------------
On hardware (:class:`RingOscillatorSource` with ``ring_oscillator`` true) the
source is a few free-running ring oscillators, each an odd chain of LUT4
inverters closed on itself.  Thermal noise in the transistors makes each
edge's timing jitter, and the jitter accumulates from one period to the next,
so a ring's phase drifts away from anything the clock can predict.  The rings
are XORed together (one healthy ring is enough to keep the XOR healthy) and
the system clock samples that through a 2-flop synchroniser (the sample is
asynchronous: the first flop may go metastable), one raw bit every
``sample_div`` cycles so that jitter accumulates between samples.  Each LUT4
carries ``keep`` and its nets too, so Yosys neither folds the inverters
together nor drops the loop it cannot analyse.

This is not a proof of entropy.  Ring oscillators can lock to each other or
to the clock (injection locking through the supply and the fabric); their
frequency moves with placement, voltage and temperature; the supply noise that
dominates their jitter is partly deterministic and, for someone with a probe
on the board, partly controllable.  The health tests below catch gross
failures only (a stuck or heavily biased output); a rate of entropy per bit
can only come from an entropy assessment of raw samples captured from the
board itself (SP 800-90B chapter 6 estimators), and that has not been done:
the ``h`` parameter is a claim, 0.5 bit per raw bit by default.

In simulation (``ring_oscillator`` false, which is what ``platform is None``
gives unless told otherwise, and how every test elaborates) the source is a
stand-in: xorshift64 seeded by ``sim_seed``, one step per raw bit, its low bit
the output (:func:`sim_source_bits` is the same sequence in Python).  It has
no entropy at all: a bitstream built with it yields a key anyone can compute.
Amaranth conversions for the SoC pass no platform, so a board build must ask
for the rings with ``ring_oscillator=True``; a Verilator build must not (the
loops cannot be simulated).  The stand-in has a test hook, the signal
``RingOscillatorSource.sim_mode`` (a :class:`SimMode`, nothing drives it):
stuck at one, or biased (nine ones and a zero, over and over: 90 % ones with
no run longer than nine, which only the proportion test can catch).

Health tests (SP 800-90B 4.4, binary source, alpha = 2^-20)
-----------------------------------------------------------
*Repetition Count Test* (4.4.1): a run of ``C`` identical samples fails, with
``C = 1 + ceil(20 / H)``.  *Adaptive Proportion Test* (4.4.2): the samples
are cut into windows of W = 1024; the window's first sample is the reference
and, counting it, ``C`` occurrences of it within the window fail, with
``C = 1 + CRITBINOM(1024, 2^-H, 1 - 2^-20)``, the smallest count a source of
min-entropy H (most likely value's probability ``2^-H``) exceeds with
probability at most alpha.  :func:`apt_cutoff` computes it at elaboration
with an exact binomial tail sum (60-digit decimals, no normal approximation):

    H     RCT   APT
    0.5   41    793
    1.0   21    589

The start-up test (4.3) is the same two tests over the first 1024 samples of
every draw, before any sample counts.  A draw takes 2048 samples:

    0 .. 1023      start-up: tested, discarded (APT window 0)
    1024 .. 1535   tested and conditioned into the key
    1536 .. 2047   tested, discarded: they complete APT window 1, so every
                   conditioned bit was seen by a whole window

A failure anywhere latches ``alarm`` (and which test: ``alarm_rct``,
``alarm_apt``) until the next ``start``, clears whatever key half was
already made, and ends the draw: no key comes out of a draw that saw one.
The tests watch every sample a draw uses; samples between draws feed nothing.

The conditioner
---------------
SipHash-2-4 (:class:`rtl.lib.siphash.SipHash`), one core used twice:

    key[0:64]   = SipHash(K0, raw[0:256])
    key[64:128] = SipHash(K1, raw[256:512])

``raw[i]`` is the draw's (1024 + i)-th sample, packed least significant bit
first into 64-bit words (``raw[0:256]`` as an integer, 32 bytes little-endian,
is the message).  K0 and K1 are public constants (:data:`CONDITIONER_KEYS`),
distinct only to separate the halves: the conditioner's job is to compress,
which rests on SipHash's mixing, not on a secret.  Each 64-bit half comes from
256 raw bits, 128 bits of entropy at the claimed H = 0.5: twice its size, hence
``h`` below 0.5 is refused.  SipHash is not one of 90B's vetted conditioning
functions (HMAC, CMAC, CBC-MAC, Hash_df, Block_cipher_df); it is used because
the design already has it and it is small, and the factor of two stands in for
the credit a vetted function would get.  One core used twice costs only the
time of a second MAC (a few dozen cycles against thousands of samples) and
saves a second 256-bit datapath.  :func:`trng_reference` is the same in Python.
"""

import enum
import math
from decimal import Decimal, localcontext
from fractions import Fraction

from amaranth import Cat, Const, Instance, Module, Mux, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from rtl.lib.siphash import SipHash, siphash

__all__ = [
    "RingOscillatorSource", "SimMode", "Trng",
    "rct_cutoff", "apt_cutoff", "sim_source_bits", "health_test_reference", "trng_reference", "draw_reference",
    "simulation_key",
    "ALPHA_LOG2", "APT_WINDOW", "STARTUP_SAMPLES", "RAW_BITS", "DRAW_SAMPLES", "CONDITIONER_KEYS",
]

ALPHA_LOG2 = 20                 # false-alarm probability per test: 2^-20
APT_WINDOW = 1024               # 90B's window for a binary source
STARTUP_SAMPLES = 1024
RAW_BITS = 512                  # conditioned into the 128-bit key
DRAW_SAMPLES = STARTUP_SAMPLES + APT_WINDOW
CONDITIONER_KEYS = (b"atomflash-trng-0", b"atomflash-trng-1")
INVERTER_INIT = 0x5555          # LUT4 truth table indexed by {D, C, B, A}: Z = ~A whatever B, C, D
XORSHIFT_MASK = 2**64 - 1


def _exact(h) -> Fraction:
    # through str: 0.1 means one tenth, not the binary float nearest it
    return Fraction(str(h)) if isinstance(h, float) else Fraction(h)


def rct_cutoff(h, alpha_log2: int = ALPHA_LOG2) -> int:
    """SP 800-90B 4.4.1: ``1 + ceil(-log2(alpha) / H)``."""
    return 1 + math.ceil(Fraction(alpha_log2) / _exact(h))


def apt_cutoff(h, window: int = APT_WINDOW, alpha_log2: int = ALPHA_LOG2) -> int:
    """SP 800-90B 4.4.2: ``1 + CRITBINOM(W, 2^-H, 1 - alpha)``, CRITBINOM(n, p, a) being the smallest
    k with P(X <= k) >= a for X ~ Binomial(n, p).  The upper tail is summed exactly term by term."""
    with localcontext() as ctx:
        ctx.prec = 60
        h = _exact(h)
        p = Decimal(2) ** (-Decimal(h.numerator) / Decimal(h.denominator))
        q = 1 - p
        alpha = Decimal(2) ** -alpha_log2
        tail = Decimal(0)                   # P(X > k), k from the top down
        for k in range(window, -1, -1):
            if tail > alpha:                # k fails P(X <= k) >= 1 - alpha; k + 1 was the smallest that passes
                return 1 + (k + 1)
            tail += math.comb(window, k) * p ** k * q ** (window - k)
        return 1


def _xorshift64(x: int) -> int:
    x ^= (x << 13) & XORSHIFT_MASK
    x ^= x >> 7
    x ^= (x << 17) & XORSHIFT_MASK
    return x


class SimMode(enum.Enum):
    """What the simulation stand-in emits."""
    RANDOM = 0      # xorshift64's low bit
    STUCK = 1       # always one
    BIASED = 2      # nine ones and a zero, repeating


def sim_source_bits(seed: int, n: int, mode: SimMode = SimMode.RANDOM) -> list[int]:
    """The simulation stand-in's first ``n`` raw bits after reset, for ``sim_seed=seed``."""
    x, bits = seed, []
    for i in range(n):
        if mode is SimMode.RANDOM:
            bits.append(x & 1)
        else:
            bits.append(1 if mode is SimMode.STUCK else int(i % 10 != 9))
        x = _xorshift64(x)
    return bits


def health_test_reference(bits, h=0.5) -> tuple[int, str] | None:
    """The first failure of the RCT and APT over ``bits`` (a draw's samples, the first an APT
    window's start), as (sample index, ``"rct"`` or ``"apt"``), or None.  Both at one sample: RCT."""
    c_rct, c_apt = rct_cutoff(h), apt_cutoff(h)
    rct_value = apt_value = None
    rct_count = apt_count = 0
    for i, b in enumerate(bits):
        if i and b == rct_value:
            rct_count += 1
        else:
            rct_value, rct_count = b, 1
        if i % APT_WINDOW == 0:
            apt_value, apt_count = b, 1
        elif b == apt_value:
            apt_count += 1
        if rct_count >= c_rct:
            return i, "rct"
        if apt_count >= c_apt:
            return i, "apt"
    return None


def trng_reference(raw_bits) -> int:
    """The key the conditioner makes of the 512 raw bits it is given, as a 128-bit integer."""
    if len(raw_bits) != RAW_BITS:
        raise ValueError(f"the conditioner takes {RAW_BITS} raw bits")
    key = 0
    for half, secret in enumerate(CONDITIONER_KEYS):
        bits = raw_bits[half * 256:(half + 1) * 256]
        message = sum(b << i for i, b in enumerate(bits)).to_bytes(32, "little")
        key |= siphash(secret, message) << (64 * half)
    return key


def draw_reference(samples, h=0.5) -> tuple[int | None, tuple[int, str] | None]:
    """A draw over ``samples`` (the raw bits from the one after ``start`` on): (key, None), or
    (None, failure) when a health test fails within the draw's :data:`DRAW_SAMPLES` (then the
    samples up to the failing one are enough)."""
    samples = list(samples[:DRAW_SAMPLES])
    failure = health_test_reference(samples, h)
    if failure is not None:
        return None, failure
    if len(samples) < DRAW_SAMPLES:
        raise ValueError(f"a draw that does not fail takes {DRAW_SAMPLES} samples")
    return trng_reference(samples[STARTUP_SAMPLES:STARTUP_SAMPLES + RAW_BITS]), None


def simulation_key(seed: int) -> bytes:
    """The key a simulated :class:`Trng` (the stand-in, a bit a cycle) draws when started in its first
    cycle: what a test that must know the key (to show a token made without it fails) computes.  The
    stand-in has no entropy: in simulation the key is known to whoever knows the seed."""
    key, failure = draw_reference(sim_source_bits(seed, 1 + DRAW_SAMPLES)[1:])
    assert failure is None, failure
    return key.to_bytes(16, "little")


class RingOscillatorSource(wiring.Component):
    """Raw bits: ring oscillators on hardware, xorshift64 in simulation (see the module's essay).

    Parameters
    ----------
    ring_oscillator : bool or None
        True: the rings.  False: the simulation stand-in.  None: the rings if elaborated with a
        platform.
    ring_lengths : tuple of int
        One ring per entry, each that many LUT4 inverters (odd, at least 3).
    sample_div : int or None
        Cycles per raw bit; None: 64 with the rings (jitter accumulates between samples), 1 without.
    sim_seed : int
        The stand-in's xorshift64 state at reset (nonzero, below 2^64).
    sim_mode : SimMode
        The stand-in's mode at reset; ``sim_mode`` (the attribute, a signal) changes it in simulation.

    Ports
    -----
    raw : Out(stream.Signature(1, always_ready=True))
        One raw bit per transfer, every ``sample_div`` cycles, taken or not.
    """

    def __init__(self, *, ring_oscillator=None, ring_lengths=(3, 5, 5, 7), sample_div=None,
                 sim_seed=1, sim_mode=SimMode.RANDOM):
        if not ring_lengths or any(n < 3 or n % 2 == 0 for n in ring_lengths):
            raise ValueError("each ring is an odd number of inverters, at least 3")
        if sample_div is not None and sample_div < 1:
            raise ValueError("sample_div is at least one cycle")
        if not 0 < sim_seed <= XORSHIFT_MASK:
            raise ValueError("xorshift64 needs a nonzero 64-bit seed")
        self.ring_oscillator, self.ring_lengths = ring_oscillator, tuple(ring_lengths)
        self.sample_div, self.sim_seed = sample_div, sim_seed
        self.sim_mode = Signal(SimMode, init=sim_mode)
        super().__init__({"raw": Out(stream.Signature(1, always_ready=True))})

    def uses_rings(self, platform) -> bool:
        return platform is not None if self.ring_oscillator is None else bool(self.ring_oscillator)

    def elaborate(self, platform):
        m = Module()
        rings = self.uses_rings(platform)
        div = self.sample_div or (64 if rings else 1)
        if div > 1:
            phase = Signal(range(div))
            m.d.sync += phase.eq(Mux(phase == div - 1, 0, phase + 1))
            m.d.comb += self.raw.valid.eq(phase == div - 1)
        else:
            m.d.comb += self.raw.valid.eq(1)

        if rings:
            taps = []
            for r, length in enumerate(self.ring_lengths):
                nets = [Signal(name=f"ring{r}_n{i}", attrs={"keep": 1}) for i in range(length)]
                for i in range(length):
                    m.submodules[f"ring{r}_inv{i}"] = Instance(
                        "LUT4", a_keep=1, p_INIT=Const(INVERTER_INIT, 16),
                        i_A=nets[i], i_B=Const(0), i_C=Const(0), i_D=Const(0), o_Z=nets[(i + 1) % length])
                taps.append(nets[0])
            mixed = Signal(attrs={"keep": 1})
            m.d.comb += mixed.eq(Cat(*taps).xor())
            sampled = Signal()
            m.submodules.synchroniser = FFSynchronizer(mixed, sampled, stages=2)
            m.d.comb += self.raw.payload.eq(sampled)
        else:
            state = Signal(64, init=self.sim_seed)
            decade = Signal(range(10))          # the biased mode's position in its nine-ones-and-a-zero
            s1 = state ^ (state << 13)[:64]
            s2 = s1 ^ (s1 >> 7)
            s3 = s2 ^ (s2 << 17)[:64]
            with m.If(self.raw.valid):
                m.d.sync += [state.eq(s3), decade.eq(Mux(decade == 9, 0, decade + 1))]
            with m.Switch(self.sim_mode):
                with m.Case(SimMode.RANDOM):
                    m.d.comb += self.raw.payload.eq(state[0])
                with m.Case(SimMode.STUCK):
                    m.d.comb += self.raw.payload.eq(1)
                with m.Case(SimMode.BIASED):
                    m.d.comb += self.raw.payload.eq(decade != 9)
        return m


class _Phase(enum.Enum):
    IDLE = 0
    DRAW = 1
    READY = 2
    FAILED = 3


class Trng(wiring.Component):
    """A 128-bit key from :class:`RingOscillatorSource`, health-tested and conditioned by SipHash.

    Parameters
    ----------
    h : float
        Claimed min-entropy per raw bit, 0.5 to 1; sets the cutoffs (``rct_cutoff``, ``apt_cutoff``
        attributes).
    ring_oscillator, ring_lengths, sample_div, sim_seed, sim_mode
        The source's (:class:`RingOscillatorSource`, the ``source`` attribute).

    Ports
    -----
    start : In(1)
        A pulse: begin a fresh draw (also while one runs).  The key stops being valid at once;
        alarms clear.  A raw bit in the same cycle belongs to no draw.
    ready : Out(1)
        ``key`` is valid: the draw finished without a health-test failure.  Held until ``start``.
    key : Out(128)
        The key while ``ready``, zero otherwise.  For gateware only.
    busy : Out(1)
        A draw runs: :data:`DRAW_SAMPLES` raw bits, ``sample_div`` cycles each, and a few more.
    alarm, alarm_rct, alarm_apt : Out(1)
        The draw failed a health test (which one); latched until ``start``.  ``busy`` and ``ready``
        are low then.
    draws, failures : Out(16)
        Draws started and draws failed since reset, wrapping.
    """

    def __init__(self, *, h=0.5, ring_oscillator=None, ring_lengths=(3, 5, 5, 7), sample_div=None,
                 sim_seed=1, sim_mode=SimMode.RANDOM):
        if not 0.5 <= h <= 1:
            raise ValueError("claimed min-entropy per bit: 0.5 (512 bits then hold twice 128) to 1")
        self.h = h
        self.rct_cutoff, self.apt_cutoff = rct_cutoff(h), apt_cutoff(h)
        self.source = RingOscillatorSource(ring_oscillator=ring_oscillator, ring_lengths=ring_lengths,
                                           sample_div=sample_div, sim_seed=sim_seed, sim_mode=sim_mode)
        self.conditioner = SipHash(words=4)
        super().__init__({
            "start": In(1),
            "ready": Out(1),
            "key": Out(128),
            "busy": Out(1),
            "alarm": Out(1),
            "alarm_rct": Out(1),
            "alarm_apt": Out(1),
            "draws": Out(16),
            "failures": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.source = source = self.source
        # a start abandons any MAC under way: its words were the old draw's
        m.submodules.conditioner = ResetInserter(self.start)(self.conditioner)
        mac = self.conditioner
        raw = source.raw

        phase = Signal(_Phase)
        sample = Signal(range(DRAW_SAMPLES))    # the draw's samples seen
        tested_all = Signal()
        rct_value, rct_count = Signal(), Signal(range(self.rct_cutoff + 1))
        apt_value, apt_count = Signal(), Signal(range(self.apt_cutoff + 1))
        word = Signal(64)                       # raw bits arriving, least significant first
        pending, pending_valid = Signal(64), Signal()
        digests = Signal(range(3))
        key = Signal(128)

        m.d.comb += [
            self.busy.eq(phase == _Phase.DRAW),
            self.ready.eq(phase == _Phase.READY),
            self.key.eq(Mux(phase == _Phase.READY, key, 0)),
            self.alarm.eq(self.alarm_rct | self.alarm_apt),
        ]

        # the conditioner: a word every 64 samples (64 cycles at least); the core is ready for the next
        # within 20 cycles of a MAC's last word, so a pending word is always gone before the next comes
        m.d.comb += [
            mac.key.eq(Mux(digests == 0, int.from_bytes(CONDITIONER_KEYS[0], "little"),
                           int.from_bytes(CONDITIONER_KEYS[1], "little"))),
            mac.message.valid.eq(pending_valid & (phase == _Phase.DRAW)),
            mac.message.payload.eq(pending),
            mac.digest.ready.eq(1),
        ]
        with m.If(mac.message.valid & mac.message.ready):
            m.d.sync += pending_valid.eq(0)

        # the health tests, on the sample arriving now
        bit = raw.payload
        rct_next = Mux((sample == 0) | (bit != rct_value), 1, rct_count + 1)
        window_start = sample[:10] == 0
        apt_next = Mux(window_start, 1, Mux(bit == apt_value, apt_count + 1, apt_count))
        rct_fails = rct_next >= self.rct_cutoff
        apt_fails = apt_next >= self.apt_cutoff

        with m.If(self.start):
            m.d.sync += [
                phase.eq(_Phase.DRAW), sample.eq(0), tested_all.eq(0), pending_valid.eq(0), digests.eq(0),
                key.eq(0), self.alarm_rct.eq(0), self.alarm_apt.eq(0), self.draws.eq(self.draws + 1),
            ]
        with m.Elif(phase == _Phase.DRAW):
            with m.If(mac.digest.valid):
                with m.If(digests == 0):
                    m.d.sync += key[:64].eq(mac.digest.payload)
                with m.Else():
                    m.d.sync += key[64:].eq(mac.digest.payload)
                m.d.sync += digests.eq(digests + 1)
            with m.If(raw.valid & ~tested_all):
                m.d.sync += [rct_value.eq(bit), rct_count.eq(rct_next), apt_count.eq(apt_next)]
                with m.If(window_start):
                    m.d.sync += apt_value.eq(bit)
                with m.If(rct_fails | apt_fails):
                    m.d.sync += [phase.eq(_Phase.FAILED), key.eq(0), self.failures.eq(self.failures + 1),
                                 self.alarm_rct.eq(rct_fails), self.alarm_apt.eq(apt_fails)]
                with m.Else():
                    m.d.sync += sample.eq(sample + 1)
                    with m.If(sample == DRAW_SAMPLES - 1):
                        m.d.sync += tested_all.eq(1)
                    collecting = (sample >= STARTUP_SAMPLES) & (sample < STARTUP_SAMPLES + RAW_BITS)
                    with m.If(collecting):
                        m.d.sync += word.eq(Cat(word[1:], bit))
                        with m.If(sample[:6] == 63):
                            m.d.sync += [pending.eq(Cat(word[1:], bit)), pending_valid.eq(1)]
            with m.If(tested_all & (digests == 2)):
                m.d.sync += phase.eq(_Phase.READY)
        return m
