"""NV-DDR2 timing registers: every value derived from spec.ONFI_NVDDR2_TIMING_PARAMS
meets its nanosecond minimum, SDR names carry the NV-DDR2 command/address values,
and bring-up's mode choice follows the parameter page and the controller's limits."""

from __future__ import annotations

import pytest

from atomflash import spec
from rtl.nand.timing import (NVDDR2_NAMES, TIMING_NAMES, choose_nvddr2_mode, nvddr2_modes_fitting,
                             nvddr2_timing_cycles, timing_cycles)

PS = spec.ONFI_NVDDR2_TIMING_PS


@pytest.mark.parametrize("clk_hz", [100_000_000, 200_000_000])
@pytest.mark.parametrize("mode", spec.ONFI_NVDDR2_MODES)
def test_every_nvddr2_minimum_is_met(mode, clk_hz):
    period = 10**12 // clk_hz
    if max(PS["tDS"][mode], PS["tDH"][mode]) > period // 2:
        with pytest.raises(ValueError):
            nvddr2_timing_cycles(mode, clk_hz)
        return
    t = nvddr2_timing_cycles(mode, clk_hz)
    assert set(t) == set(TIMING_NAMES)
    for name in ("tWP", "tWH", "tWC", "tCS", "tCH", "tADL", "tWHR", "tRHW", "tWB", "tRR", "tAR", "tCLR"):
        assert t[name] * period >= PS[name][mode], name
    for sdr, own in spec.ONFI_NVDDR2_FOR_SDR.items():
        assert t[sdr] * period >= PS[own][mode], (sdr, own)
    # a byte per tUI cycles: DQS and RE# high and low at least tUI cycles, a whole period 2 tUI
    for name in ("tRP", "tREH", "tDQSH", "tDQSL"):
        assert t["tUI"] * period >= PS[name][mode], name
    assert 2 * t["tUI"] * period >= PS["tRC"][mode]
    # DQ half a cycle before and after its DQS edge
    assert period // 2 >= PS["tDS"][mode] and period // 2 >= PS["tDH"][mode]
    assert t["tPRE"] * period >= max(PS["tWPRE"][mode], PS["tRPRE"][mode])
    assert t["tPST"] * period >= PS["tWPST"][mode]
    # and no slack beyond a cycle's rounding
    assert (t["tUI"] - 1) * period < max(PS["tRC"][mode] // 2, PS["tDQSH"][mode], PS["tRP"][mode])


def test_sdr_registers_leave_nvddr2_off():
    for mode in spec.ONFI_MODES:
        assert all(timing_cycles(mode)[name] == 0 for name in NVDDR2_NAMES)


def test_clock_too_slow_for_tds_refuses_the_mode():
    # 40 MHz: half a cycle is 12.5 ns, more than any tDS, so all fit; 1 GHz-class clocks too
    assert nvddr2_modes_fitting(40_000_000) == 0xFF
    # tDS/tDH of mode 0 (4 ns) ask for half a cycle of at least 4 ns: not at 200 MHz's 2.5 ns
    assert not nvddr2_modes_fitting(200_000_000) & 1
    with pytest.raises(ValueError, match="tDS"):
        nvddr2_timing_cycles(0, 200_000_000)
    with pytest.raises(ValueError, match="does not exist"):
        nvddr2_timing_cycles(8)


def _page(nvddr2: bool, modes: int) -> bytes:
    p = bytearray(256)
    p[:4] = b"ONFI"
    feats = (1 << spec.OnfiParamFeature.NV_DDR2) if nvddr2 else 0
    p[spec.ONFI_PARAM.FEATURES:spec.ONFI_PARAM.FEATURES + 2] = feats.to_bytes(2, "little")
    p[spec.ONFI_PARAM.NVDDR2_MODES] = modes
    return bytes(p)


def test_bring_up_picks_the_fastest_mode_both_sides_run():
    assert choose_nvddr2_mode(_page(True, 0xFF), 0xFF) == 7
    assert choose_nvddr2_mode(_page(True, 0x3F), 0xFF) == 5          # the part's limit
    assert choose_nvddr2_mode(_page(True, 0xFF), 0xFF, 4) == 4       # the controller's maximum
    assert choose_nvddr2_mode(_page(True, 0x0F), 0xF0) is None       # no mode in common
    assert choose_nvddr2_mode(_page(False, 0xFF), 0xFF) is None      # no NV-DDR2 feature bit
    assert choose_nvddr2_mode(b"XXXX" + _page(True, 0xFF)[4:], 0xFF) is None
