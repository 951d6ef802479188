"""cocotb side of sim/demo.py: stamp the demo log with the RTL OOB packer."""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from atomflash import spec


@cocotb.test()
async def stamp_demo_log(dut):
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    dut.record__valid.value = 0
    dut.bytes__ready.value = 1
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    out = []
    for fields in json.loads(open(os.environ["DEMO_LOG"]).read()):
        fields.setdefault("format", spec.OOB_FORMAT)
        dut.record__payload.value = int.from_bytes(spec.OOB.pack(fields), "little")
        dut.record__valid.value = 1
        await RisingEdge(dut.clk)
        dut.record__valid.value = 0
        raw = bytearray()
        while True:
            await ReadOnly()
            if dut.bytes__valid.value:
                payload = int(dut.bytes__payload.value)
                raw.append(payload & 0xFF)
                if payload >> 8:
                    break
            await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        out.append(raw.hex())
    with open(os.environ["DEMO_OUT"], "w") as f:
        json.dump(out, f)
