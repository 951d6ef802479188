"""Simulation tools: the demos, the power-fault campaign, the soak, the
benchmarks (``bench_*.py``), and what they share with the tests in ``tb/``.

Layers call downward only: ``tb/`` may import anything here; nothing here (nor
in ``soc/``, ``rtl/`` or ``host/atomflash``) imports ``tb/``
(``tb/spec/test_layers.py``).

* :mod:`sim.harness` -- Verilator/cocotb build-and-run glue, the harness tops
  and the cocotb drivers, for the tests and the benchmarks alike;
* :mod:`sim.flashimg` -- NAND model images as the controller writes and reads
  them (pre-written flash; the campaign's and the tests' independent reading);
* :mod:`sim.simboot` -- build the simulated SoC once and boot it with given
  NAND model configurations (the SoC tests and ``bench_soc.py``).
"""
