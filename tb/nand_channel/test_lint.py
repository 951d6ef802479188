"""Verilator lint of the generated controller Verilog: nothing beyond the
WIDTH and CASEINCOMPLETE warnings Amaranth's output is known to draw."""

import re
import subprocess

import pytest

from rtl.nand.channel import ChannelParams
from rtl.nand.controller import NandController
from sim.harness import runner

KNOWN = {"WIDTH", "WIDTHEXPAND", "WIDTHTRUNC", "CASEINCOMPLETE"}


def lint(component, name, key):
    verilog = runner.amaranth_verilog(component, name, key=key)
    out = subprocess.run(["verilator", "--lint-only", str(verilog), "--top-module", name],
                         capture_output=True, text=True)
    messages = re.findall(r"^%(Warning|Error)(?:-([A-Z0-9_]+))?: (.*)$", out.stdout + out.stderr, re.M)
    return [(kind, code, text) for kind, code, text in messages if not text.startswith("Exiting due to")]


@pytest.mark.parametrize("profile,channels,ways,ecc", [("small", 2, 2, True), ("realistic", 1, 4, False)])
def test_controller_lints_clean(profile, channels, ways, ecc):
    name = f"lint_nand_controller_{profile}_c{channels}w{ways}{'' if ecc else '_raw'}"
    found = lint(NandController(ChannelParams(profile, ways=ways, ecc=ecc), channels=channels), name,
                 key=dict(profile=profile, channels=channels, ways=ways, ecc=ecc))
    unexpected = [m for m in found if m[0] == "Error" or m[1] not in KNOWN]
    assert not unexpected, unexpected[:10]
    assert found, "the lint run produced no output at all: is verilator running?"
