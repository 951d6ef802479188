"""The SATA device PHY and link (rtl/sata) against LiteSATA's host, back to
back through a cable model, under cocotb on Verilator (cocotb_sata_link.py);
and the link's scrambler and CRC against LiteSATA's, in Migen's simulator."""

from pathlib import Path

from sim.harness import runner

HERE = Path(__file__).parent


def _build():
    from tb.sata_link.cable import SataBackToBack
    from tb.sata_link.litesata_host import host_verilog

    host_v, ports = host_verilog(runner.BUILD / "rtl")
    top = SataBackToBack("litesata_host", ports)
    top_v = runner.amaranth_verilog(top, "sata_b2b")
    return [host_v, top_v]


def test_sata_link_back_to_back():
    runner.run(toplevel="sata_b2b", sources=_build(), test_module="cocotb_sata_link", build_name="sata_link",
               test_dir=HERE)


def test_scrambler_matches_litesata():
    from migen.sim import run_simulation
    from litesata.core.link import Scrambler

    from rtl.sata.link import scrambler_masks

    scrambler = Scrambler()
    got = []

    def bench():
        yield scrambler.ce.eq(1)
        for _ in range(40):
            yield
            got.append((yield scrambler.value))

    run_simulation(scrambler, bench())
    want = scrambler_masks(41)
    assert got[0] in want[:2]
    start = want.index(got[0])
    assert got == want[start:start + 40]


def test_crc_matches_litesata():
    import random

    from migen.sim import run_simulation
    from litesata.core.link import LiteSATACRC

    from rtl import spec as hw

    rnd = random.Random(7)
    words = [rnd.getrandbits(32) for _ in range(30)]
    crc = LiteSATACRC()
    values = []

    def bench():
        yield crc.ce.eq(1)
        for w in words:
            yield crc.data.eq(w)
            yield
            values.append((yield crc.value))   # the register one word behind: it holds the CRC so far
        yield crc.ce.eq(0)
        yield
        values.append((yield crc.value))

    run_simulation(crc, bench())
    algo = hw.SATA_CRC(data_width=32)
    assert values[1:] == [algo.compute(words[:k]) for k in range(1, len(words) + 1)]


def test_spec_crc_check_value():
    from atomflash import spec
    from rtl import spec as hw

    assert hw.SATA_CRC(data_width=8).compute(b"123456789") == spec.SATA_CRC.check
