"""cocotb side of ``make bench-ecc`` (sim/bench_ecc.py): the BCH top's latency and
throughput in cycles (:func:`sim.harness.ecc_tb.measure`), written as JSON to
``$ECC_BENCH_OUT``."""

from __future__ import annotations

import json
import os

import cocotb

from sim.harness.ecc_tb import measure


@cocotb.test()
async def bench(dut):
    figures = await measure(dut)
    out = os.environ.get("ECC_BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(figures, f, indent=1)
