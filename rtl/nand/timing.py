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

Three more fields run the NV-DDR2 data path (:mod:`rtl.nand.phy`), all 0 in
SDR: ``tUI`` (cycles per byte of an NV-DDR2 burst, the DQS and RE# half
period; non-zero selects NV-DDR2), ``tPRE`` (the DQS write preamble tWPRE and
the RE# read preamble tRPRE) and ``tPST`` (the DQS write postamble tWPST).
In NV-DDR2 the SDR fields carry the NV-DDR2 table's values under their SDR
names (``spec.ONFI_NVDDR2_FOR_SDR``: tCALS for tCLS and tALS, tCAS for the
command and address cycles' tDS, ...), so command and address cycles run
through the same WE# logic in both interfaces; :func:`nvddr2_timing_cycles`
derives all of them from ``spec.ONFI_NVDDR2_TIMING_PARAMS``.
"""

from __future__ import annotations

from amaranth.lib import data

from atomflash import spec

__all__ = ["TIMING", "TIMING_NAMES", "TIMING_BITS", "timing_cycles", "timing_table", "timing_const",
           "nvddr2_timing_cycles", "nvddr2_timing_const", "nvddr2_modes_fitting", "choose_nvddr2_mode"]

TIMING_BITS = 8
#: The NV-DDR2 data path's fields (0 in SDR).
NVDDR2_NAMES = ("tUI", "tPRE", "tPST")
TIMING_NAMES = tuple(name for name, _, _ in spec.ONFI_TIMING_PARAMS) + ("tCCS", "tSAMPLE") + NVDDR2_NAMES

TIMING = data.StructLayout({name: TIMING_BITS for name in TIMING_NAMES})
"""Layout of the timing register block: one field per ONFI parameter, in cycles."""


def timing_cycles(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = 0) -> dict[str, int]:
    """The register values for ONFI ``mode`` at ``clk_hz``."""
    period_ps = 10**12 // clk_hz
    cycles = dict(spec.onfi_timing_cycles(mode, clk_hz), tCCS=-(-spec.NAND_TCCS_NS * 1000 // period_ps),
                  tSAMPLE=sample, **{name: 0 for name in NVDDR2_NAMES})
    return _fits(cycles, clk_hz)


def _fits(cycles: dict[str, int], clk_hz: int) -> dict[str, int]:
    for name, value in cycles.items():
        if value >> TIMING_BITS:
            raise ValueError(f"{name} = {value} cycles does not fit {TIMING_BITS} bits at {clk_hz} Hz")
    return cycles


def nvddr2_timing_cycles(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = 0) -> dict[str, int]:
    """The register values for NV-DDR2 ``mode`` at ``clk_hz``.

    The PHY changes DQ on a rising clock edge and moves DQS half a cycle
    later (DDR output), so a data input byte has half a cycle of setup and
    at least half a cycle of hold to its DQS edge: a clock whose half period
    is shorter than the mode's tDS or tDH cannot run it (``ValueError``).
    A byte takes ``tUI`` whole cycles, the longest of tRC/2, tRP, tREH,
    tDQSH and tDQSL, at least one.
    """
    if mode not in spec.ONFI_NVDDR2_MODES:
        raise ValueError(f"NV-DDR2 timing mode {mode} does not exist")
    period_ps = 10**12 // clk_hz
    ps = {name: values[mode] for name, values in spec.ONFI_NVDDR2_TIMING_PS.items()}

    def cyc(value_ps: int) -> int:
        return -(-value_ps // period_ps)

    half = period_ps // 2
    for name in ("tDS", "tDH"):
        if ps[name] > half:
            raise ValueError(f"NV-DDR2 mode {mode}: {name} = {ps[name]} ps is more than half a cycle at {clk_hz} Hz")
    cycles = {}
    for name, _, _ in spec.ONFI_TIMING_PARAMS:
        own = spec.ONFI_NVDDR2_FOR_SDR.get(name, name)
        # tREA and tCEA (SDR output timing) have no NV-DDR2 meaning: data follows DQS
        cycles[name] = cyc(ps[own]) if own in ps else 0
    cycles.update(
        tCCS=-(-spec.NAND_TCCS_NS * 1000 // period_ps), tSAMPLE=sample,
        tUI=max(1, cyc(ps["tRC"] // 2), cyc(ps["tRP"]), cyc(ps["tREH"]), cyc(ps["tDQSH"]), cyc(ps["tDQSL"])),
        tPRE=max(1, cyc(ps["tWPRE"]), cyc(ps["tRPRE"])), tPST=max(1, cyc(ps["tWPST"])))
    return _fits(cycles, clk_hz)


def nvddr2_timing_const(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = 0) -> data.Const:
    """A :data:`TIMING` constant for NV-DDR2 ``mode``."""
    return TIMING.const(nvddr2_timing_cycles(mode, clk_hz, sample))


def nvddr2_modes_fitting(clk_hz: int = spec.NAND_CLK_HZ) -> int:
    """Bit mask of the NV-DDR2 modes the PHY can run at ``clk_hz`` (bit n = mode n)."""
    mask = 0
    for mode in spec.ONFI_NVDDR2_MODES:
        try:
            nvddr2_timing_cycles(mode, clk_hz)
            mask |= 1 << mode
        except ValueError:
            pass
    return mask


def timing_table(clk_hz: int = spec.NAND_CLK_HZ) -> dict[int, dict[str, int]]:
    """``{mode: {parameter: cycles}}`` for every ONFI mode at ``clk_hz``."""
    return {mode: timing_cycles(mode, clk_hz) for mode in spec.ONFI_MODES}


def timing_const(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = 0) -> data.Const:
    """A :data:`TIMING` constant (e.g. a register's reset value) for ``mode``."""
    return TIMING.const(timing_cycles(mode, clk_hz, sample))


def choose_nvddr2_mode(param_page: bytes, controller_modes: int, controller_max: int = 7) -> int | None:
    """The NV-DDR2 mode bring-up switches to: the fastest one the part's parameter page lists
    (features bit NV_DDR2, byte ``NVDDR2_MODES``) that the controller runs too (bit mask
    ``controller_modes``, e.g. :func:`nvddr2_modes_fitting`, and at most ``controller_max``);
    None when there is none (the bus stays SDR)."""
    p = spec.ONFI_PARAM
    features = int.from_bytes(param_page[p.FEATURES:p.FEATURES + 2], "little")
    if param_page[:4] != b"ONFI" or not features >> spec.OnfiParamFeature.NV_DDR2 & 1:
        return None
    both = param_page[p.NVDDR2_MODES] & controller_modes & ((2 << controller_max) - 1)
    return both.bit_length() - 1 if both else None


def timing_markdown(clk_hz: int = spec.NAND_CLK_HZ) -> str:
    """The mode 0-5 table at ``clk_hz`` as Markdown (for docs/nand_channel.md)."""
    table = timing_table(clk_hz)
    docs = {name: doc for name, _, doc in spec.ONFI_TIMING_PARAMS}
    docs["tCCS"] = "change column setup (parameter page)"
    docs["tSAMPLE"] = "extra pin-to-sample latency (not ONFI)"
    docs["tUI"] = "NV-DDR2 cycles per byte (0 in SDR)"
    docs["tPRE"] = "NV-DDR2 tWPRE / tRPRE (0 in SDR)"
    docs["tPST"] = "NV-DDR2 tWPST (0 in SDR)"
    head = "| parameter | " + " | ".join(f"mode {m}" for m in table) + " | meaning |\n"
    head += "| --- | " + " | ".join("---:" for _ in table) + " | --- |\n"
    rows = "".join(f"| {name} | " + " | ".join(str(table[m][name]) for m in table) + f" | {docs[name]} |\n"
                   for name in TIMING_NAMES)
    return head + rows
