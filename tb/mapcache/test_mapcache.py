"""Mapping-table cache (rtl/ftl/mapcache.py) under cocotb on Verilator."""

from pathlib import Path

from rtl.ftl.mapcache import MapCache
from sim.harness import runner

HERE = Path(__file__).parent

# Small on purpose: 4 sets x 2 ways x 4 entries = 32 cached entries, so the
# tests' 256-LBA working set forces evictions and write-backs constantly.
GEOMETRY = dict(lba_bits=16, sets=4, ways=2, line=4, segments=16)


def test_mapcache():
    verilog = runner.amaranth_verilog(MapCache(**GEOMETRY), "mapcache")
    runner.run(toplevel="mapcache", sources=[verilog], test_module="cocotb_mapcache",
               build_name="mapcache", test_dir=HERE,
               extra_env={k.upper(): str(v) for k, v in GEOMETRY.items()})
