"""Verilator + cocotb harnesses shared by the tests (``tb/``) and the tools
(``sim/bench_*.py``, ``sim/demo_*.py``).

* :mod:`.runner` -- build (once) and run a cocotb module against a top;
* :mod:`.nand_channel` -- the NAND controller top against one NAND model per
  target; :mod:`.channel_tb` drives it from cocotb (:mod:`.nandctl`: the
  models' control port);
* :mod:`.ftl_core` -- the FTL core with the NAND models and SoC memory;
  :mod:`.ftl_tb` drives it;
* :mod:`.ecc_bch` -- the BCH encoder/decoder top; :mod:`.ecc_tb` drives it;
* :mod:`.clock`, :mod:`.layouts`, :mod:`.streams`, :mod:`.wishbone` -- cocotb
  helpers (clock cycles, Amaranth layouts, stream and Wishbone endpoints).

A cocotb module runs inside the simulator with the repository root on
``sys.path`` (:func:`.runner.run`), so it imports these as ``sim.harness.*``.
"""
