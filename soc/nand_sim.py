"""Simulation wiring of the NAND model (``sim/nand_model``, issue #3) into the SoC.

One ``nand_model`` instance per target (channel x way), clocked by ``sys``.
Each instance reads ``+nand<INDEX>_config=<file>`` / ``+nand<INDEX>_set=...``
plusargs at start (``atomflash.nandsim.plusargs``); without them it runs the
small profile on ``nand<INDEX>.img`` in the run directory, so the image
persists across runs and a restart is a power cycle.

Pins: the model wants split DQ (``dq_i`` from the host, ``dq_o``/``dq_oe`` from
the target).  When the controller core has ``nand_*`` ports, ``wire_core``
connects them (per channel: shared inputs but ``ce_n``, DQ outputs OR-ed under
``dq_oe``, R/B# per target).  The placeholder core has none, so the models sit
idle (CE# high) -- enough to prove that the model compiles and links into the
full-system build.
"""

from __future__ import annotations

from pathlib import Path

from migen import ClockSignal, Instance, Signal

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "sim" / "nand_model"


def add_nand_models(soc, *, channels: int, ways: int, gen_dir: Path):
    """Instantiate channels x ways NAND models in ``soc`` and register their
    sources/flags with the simulation build (``soc.sim_*``, see soc/sim.py)."""
    from atomflash import nandsim  # the model's generated C++ header

    nandsim.write_header(gen_dir)
    soc.platform.add_source(str(MODEL_DIR / "nand_model.sv"))
    soc.sim_sources.append(MODEL_DIR / "nand_model.cpp")
    soc.sim_cflags.append(f"-I{gen_dir} -I{MODEL_DIR}")

    soc.nand_pins = []
    for ch in range(channels):
        for way in range(ways):
            index = ch * ways + way
            pins = dict(
                ce_n=Signal(reset=1), cle=Signal(), ale=Signal(), we_n=Signal(reset=1),
                re_n=Signal(reset=1), wp_n=Signal(reset=1), dq_i=Signal(8),
                dq_o=Signal(8), dq_oe=Signal(), rb_n=Signal(),
            )
            soc.nand_pins.append(pins)
            soc.specials += Instance(
                "nand_model", name=f"nand{index}", p_INDEX=index,
                i_clk=ClockSignal("sys"),
                **{("o_" if k in ("dq_o", "dq_oe", "rb_n") else "i_") + k: v for k, v in pins.items()})
