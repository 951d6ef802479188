"""boards/depth.py on hand-made netlists: the arrival of a register's input is the sum of the cell and
net delays along its slowest path, a carry chain pays its per-bit delay and no routing inside, a ring
oscillator (a combinational loop) is cut rather than followed forever, and the report names the
register, its bits and the source lines on the way."""

from boards import depth


def ff(d, q, src="top.py:1"):
    return {"type": "TRELLIS_FF", "port_directions": {"CLK": "input", "DI": "input", "CE": "input", "LSR": "input",
                                                      "Q": "output"},
            "connections": {"CLK": [2], "DI": [d], "CE": ["1"], "LSR": ["0"], "Q": [q]},
            "attributes": {"src": src}, "parameters": {}}


def lut(a, b, z, src=""):
    return {"type": "LUT4", "port_directions": {"A": "input", "B": "input", "C": "input", "D": "input", "Z": "output"},
            "connections": {"A": [a], "B": [b], "C": ["0"], "D": ["0"], "Z": [z]}, "attributes": {"src": src},
            "parameters": {}}


def ccu2c(cin, a, cout, s):
    ports = {p: "input" for p in ("A0", "A1", "B0", "B1", "C0", "C1", "D0", "D1", "CIN")}
    ports |= {"COUT": "output", "S0": "output", "S1": "output"}
    conns = {p: ["0"] for p in ports} | {"CIN": [cin], "A0": [a], "COUT": [cout], "S0": [s], "S1": ["x"]}
    return {"type": "CCU2C", "port_directions": ports, "connections": conns, "attributes": {}, "parameters": {}}


def design(cells, netnames):
    return {"modules": {"top": {"attributes": {"top": "00000000000000000000000000000001"},
                                "ports": {"clk": {"direction": "input", "bits": [2]}},
                                "cells": cells, "netnames": netnames}}}


def test_a_lut_chain_between_two_registers():
    # q10 -> 3 LUTs -> d of the second register
    cells = {"a": ff(14, 10), "l1": lut(10, 10, 11, "blk.py:5"), "l2": lut(11, 10, 12), "l3": lut(12, 11, 13),
             "b": ff(13, 14, "blk.py:9")}
    nets = {"start": {"bits": [10], "attributes": {"src": "blk.py:2"}},
            "mid": {"bits": [12], "attributes": {"src": "blk.py:7"}},
            "end": {"bits": [14], "attributes": {"src": "blk.py:9"}}}
    net = depth.Netlist(design(cells, nets))
    want = depth.CLK_TO_Q_NS + 3 * (depth.ROUTE_NS + 0.24)
    assert abs(net.arrival(13) - want) < 1e-9
    [e] = depth.worst(net, budget=2.0, top=5)
    assert e.register == "end (D)" and e.bits == 1
    assert abs(e.arrival - (want + depth.ROUTE_NS)) < 1e-9
    assert [n for n, _, _ in e.path][:1] == ["start"] and "mid" in [n for n, _, _ in e.path]
    assert "blk.py:7" in depth.describe(e)
    assert ("blk.py:7", 1) in [(line, n) for line, n, _ in depth.through(net, 2.0)]


def test_a_carry_chain_pays_its_bits_not_routing():
    cells = {"a": ff(20, 10), "c0": ccu2c("0", 10, 11, 30), "c1": ccu2c(11, "0", 12, 31), "c2": ccu2c(12, "0", 13, 32),
             "b": ff(32, 20)}
    net = depth.Netlist(design(cells, {}))
    want = depth.CLK_TO_Q_NS + depth.ROUTE_NS + 0.45 + 0.07 + 0.44
    assert abs(net.arrival(32) - want) < 1e-9


def test_a_ring_oscillator_is_cut():
    cells = {"r1": lut(41, "0", 40), "r2": lut(40, "0", 41), "b": ff(41, 42)}
    net = depth.Netlist(design(cells, {}))
    assert net.arrival(41) < 5
    assert [t for t, *_ in net.endpoints()]


def placed(locations):
    """A design as nextpnr writes it after placement: every cell with its tile (CCU2C split in two)."""
    cells = {}
    for name, (x, y) in locations.items():
        cells[name] = {"type": "TRELLIS_COMB", "attributes": {"NEXTPNR_BEL": f"X{x}/Y{y}/SLICEA.K0"}}
    return {"modules": {"top": {"cells": cells}}}


def test_placed_nets_pay_their_distance():
    # the same chain, its middle LUT placed far away: both nets to and from it pay the distance
    cells = {"a": ff(14, 10), "l1": lut(10, 10, 11), "l2": lut(11, 10, 12), "b": ff(12, 14)}
    near, far = (10, 10), (70, 50)
    net = depth.Netlist(design(cells, {}), placed=placed({"a": near, "l1": near, "l2": far, "b": near}))
    assert depth.placed_route_ns(near, near) == 0.12 * 3
    assert abs(depth.placed_route_ns(near, far) - 0.12 * (3 + 55 + 35 + 20)) < 1e-9
    hop, long = depth.placed_route_ns(near, near), depth.placed_route_ns(near, far)
    want = depth.CLK_TO_Q_NS + hop + 0.24 + long + 0.24
    assert abs(net.arrival(12) - want) < 1e-9
    [e] = depth.worst(net, budget=2.0, top=5)
    assert abs(e.arrival - (want + long)) < 1e-9       # the register's input net comes back from far
    # a cell nextpnr renamed (a carry chain's half) is found under its Yosys name
    cells = {"a": ff(20, 10), "c0": ccu2c("0", 10, 11, 30), "b": ff(30, 20)}
    net = depth.Netlist(design(cells, {}), placed=placed({"a": near, "c0$CCU2_COMB0": far, "b": far}))
    assert abs(net.arrival(30) - (depth.CLK_TO_Q_NS + long + 0.45)) < 1e-9


def test_blocks_charge_unnamed_logic_to_the_named_net_it_feeds():
    # core.a: a LUT (unnamed output) feeding its register; core.b: two LUTs in a row before its register;
    # the LUT feeding only another block's register is that block's
    cells = {"ra": ff(11, 12), "la": lut(12, 12, 11),
             "l1": lut(12, 12, 20), "l2": lut(20, 20, 21), "rb": ff(21, 22)}
    nets = {"core.a.reg": {"bits": [12], "attributes": {}},
            "core.b.x": {"bits": [22], "attributes": {}},
            "$auto$1": {"bits": [11], "hide_name": 1, "attributes": {}},
            "$auto$2": {"bits": [20], "hide_name": 1, "attributes": {}}}
    net = depth.Netlist(design(cells, nets))
    rows = {b: n for b, n, _ in depth.blocks(net, 2)}
    assert rows == {"core.a": {"TRELLIS_FF": 1, "LUT4": 1}, "core.b": {"TRELLIS_FF": 1, "LUT4": 2}}
    assert [b for b, _, _ in depth.blocks(net, 1, under="core.b")] == ["core.b.x"]
    assert depth.blocks(net, 1, under="core.c") == []
    assert "core.b" in depth.describe_blocks(depth.blocks(net, 2), 5)
