"""OnfiPads on ECP5: every ONFI output through an ODDRX1F, DQ and DQS back through IDDRX1F
(elaborated with the Lattice platform's buffers; no toolchain needed)."""

from __future__ import annotations

import pytest
from amaranth.hdl import Fragment, Instance, IOPort
from amaranth.lib import io
from amaranth.vendor import LatticeECP5Platform

from rtl.nand.pads import PAD_NAMES, OnfiPads

TARGETS = 2


class _Ecp5(LatticeECP5Platform):
    device, package, speed = "LFE5U-25F", "BG256", "6"
    resources, connectors = [], []


def _ports():
    width = {"dq": 8, "ce_n": TARGETS, "rb_n": TARGETS}
    return {name: io.SingleEndedPort(IOPort(width.get(name, 1), name=name)) for name in PAD_NAMES}


def _instances(fragment, found):
    if isinstance(fragment, Instance):
        found.append(fragment.type)
    for sub, _, _ in fragment.subfragments:
        _instances(sub, found)
    return found


def test_pads_map_onto_ecp5_ddr_cells():
    frag = Fragment.get(OnfiPads(TARGETS, _ports()), _Ecp5())
    cells = _instances(frag, [])
    # one ODDRX1F per output bit: CE# x2, CLE, ALE, WE#, RE#, WP#, DQ x8, DQS
    assert cells.count("ODDRX1F") == TARGETS + 5 + 8 + 1
    assert cells.count("IDDRX1F") == 8 + 1                      # DQ and DQS captured on both edges


def test_pads_name_what_is_missing():
    ports = _ports()
    del ports["dqs"]
    with pytest.raises(ValueError, match="dqs"):
        OnfiPads(TARGETS, ports)
