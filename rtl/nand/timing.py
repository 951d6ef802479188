"""ONFI interface timing as runtime registers, in controller cycles.

Every ONFI asynchronous timing parameter of ``atomflash.spec.ONFI_TIMING_PARAMS``
is one 8-bit field of :data:`TIMING`; the PHY reads them every cycle, so the
firmware can switch timing modes (after SET FEATURES, or to slow a marginal
board down) without re-synthesis.  Values are whole cycles, rounded up from the
nanosecond minimums/maximums by ``spec.onfi_timing_cycles``.

Two fields are not in the ONFI table: ``tCCS`` (change column setup, which a
part reports in its parameter page; default ``spec.NAND_TCCS_NS``) and
``tSAMPLE``, the cycles between the DQ pins and the PHY's sampling register
on top of tREA (input registers in the I/O ring, or a model that answers a
cycle late).  ``tSAMPLE`` defaults to 0.
"""

from __future__ import annotations

from amaranth.lib import data

from atomflash import spec

__all__ = ["TIMING", "TIMING_NAMES", "TIMING_BITS", "timing_cycles", "timing_table", "timing_const"]

TIMING_BITS = 8
TIMING_NAMES = tuple(name for name, _, _ in spec.ONFI_TIMING_PARAMS) + ("tCCS", "tSAMPLE")

TIMING = data.StructLayout({name: TIMING_BITS for name in TIMING_NAMES})
"""Layout of the timing register block: one field per ONFI parameter, in cycles."""


def timing_cycles(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = 0) -> dict[str, int]:
    """The register values for ONFI ``mode`` at ``clk_hz``."""
    period_ps = 10**12 // clk_hz
    cycles = dict(spec.onfi_timing_cycles(mode, clk_hz), tCCS=-(-spec.NAND_TCCS_NS * 1000 // period_ps),
                  tSAMPLE=sample)
    for name, value in cycles.items():
        if value >> TIMING_BITS:
            raise ValueError(f"{name} = {value} cycles does not fit {TIMING_BITS} bits at {clk_hz} Hz")
    return cycles


def timing_table(clk_hz: int = spec.NAND_CLK_HZ) -> dict[int, dict[str, int]]:
    """``{mode: {parameter: cycles}}`` for every ONFI mode at ``clk_hz``."""
    return {mode: timing_cycles(mode, clk_hz) for mode in spec.ONFI_MODES}


def timing_const(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = 0) -> data.Const:
    """A :data:`TIMING` constant (e.g. a register's reset value) for ``mode``."""
    return TIMING.const(timing_cycles(mode, clk_hz, sample))


def timing_markdown(clk_hz: int = spec.NAND_CLK_HZ) -> str:
    """The mode 0-5 table at ``clk_hz`` as Markdown (for docs/nand_channel.md)."""
    table = timing_table(clk_hz)
    docs = {name: doc for name, _, doc in spec.ONFI_TIMING_PARAMS}
    docs["tCCS"] = "change column setup (parameter page)"
    docs["tSAMPLE"] = "extra pin-to-sample latency (not ONFI)"
    head = "| parameter | " + " | ".join(f"mode {m}" for m in table) + " | meaning |\n"
    head += "| --- | " + " | ".join("---:" for _ in table) + " | --- |\n"
    rows = "".join(f"| {name} | " + " | ".join(str(table[m][name]) for m in table) + f" | {docs[name]} |\n"
                   for name in TIMING_NAMES)
    return head + rows
