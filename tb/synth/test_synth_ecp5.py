"""Synthesis check of the controller core for ECP5 (Yosys ``synth_ecp5``, no place and route).

The smallest configuration that still contains every block: the board
controller core (:class:`boards.nand_bridge.NandBridge`: Wishbone registers,
descriptor/completion path, LED logic) around ``NandController`` with one
channel of 2 ways (the per-target queues and the way scheduler exist only
with more than one way), 2 buffer slots and BCH ECC on, small profile.
Fails on anything Yosys cannot synthesize, latches, combinational loops and
memories left unmapped (see :mod:`boards.synth`); the page buffer must land
in DP16KD block RAM, not flip-flops.  The fast check stops before LUT
mapping (about a minute on one core); ``make board-report`` runs the whole
flow and place-and-route.

The negative cases prove the checks bite: a latch, a combinational loop and
a simulation-only statement ($display) each fail.
"""

import pytest

from boards.nand_bridge import NandBridge
from boards.synth import OUT, SynthError, synth, synth_verilog
from rtl.nand.channel import ChannelParams


@pytest.mark.long
def test_controller_core_synth_ecp5():
    params = ChannelParams("small", ways=2, slots=2, ecc=True)
    bridge = NandBridge(params, 1)
    res = synth(bridge, "af_nand_core_check", full=False)
    # 2 slots x (2048 + 128) bytes = 1088 words per byte lane: one DP16KD (2048 x 9) per lane
    assert res["DP16KD"] == 4, res
    # sanity: the whole channel is there (BCH decoder alone has > 1000 FFs), nothing exploded into FFs
    assert 1500 < res["FF"] < 8000, res


BAD = {
    "latch": ("module bad_latch(input en, input d, output reg q);\n"
              "  always @* if (en) q = d;\nendmodule\n"),
    "loop": ("module bad_loop(input a, output y);\n"
             "  wire b, c;\n  assign b = a ^ c;\n  assign c = ~b;\n  assign y = c;\nendmodule\n"),
    # a simulation-only statement left in the RTL (what an Amaranth Print/Assert becomes)
    "unsynthesizable": ("module bad_unsynth(input clk, input [7:0] a, output reg [7:0] y);\n"
                        "  always @(posedge clk) begin y <= a; $display(\"a=%d\", a); end\nendmodule\n"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_synth_check_rejects(kind):
    OUT.mkdir(parents=True, exist_ok=True)
    top = f"bad_{kind}" if kind != "unsynthesizable" else "bad_unsynth"
    v = OUT / f"{top}.v"
    v.write_text(BAD[kind])
    with pytest.raises(SynthError):
        synth_verilog(v, top)
