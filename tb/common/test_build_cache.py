"""rtl.build_cache: a design is converted again exactly when its key, its sources or its Verilog changed."""

import gc
import warnings

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl import build_cache
from rtl.build_cache import write_verilog


class Adder(wiring.Component):
    def __init__(self, width):
        self.width = width
        super().__init__({"a": In(width), "b": In(width), "o": Out(width + 1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(self.a + self.b)
        return m


class Unconvertible:
    """Stands for a component that must not be converted (a cache hit never touches it)."""


def test_same_key_reuses_the_verilog_without_converting(tmp_path):
    first = write_verilog(Adder(8), "adder", tmp_path, key={"width": 8})
    text = first.read_text()
    assert "module adder" in text
    again = write_verilog(Unconvertible(), "adder", tmp_path, key={"width": 8})
    assert again == first and again.read_text() == text


class Pair(wiring.Component):
    """Builds its sub-components in its constructor, as the controller does."""

    def __init__(self):
        self.parts = [Adder(4), Adder(4)]
        super().__init__({"o": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules += self.parts
        return m


def test_a_cache_hit_leaves_no_unused_elaboratable_warning(tmp_path):
    write_verilog(Pair(), "pair", tmp_path, key={})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_verilog(Pair(), "pair", tmp_path, key={})   # a hit: never elaborated
        gc.collect()
    assert not [w for w in caught if "never used" in str(w.message)], [str(w.message) for w in caught]


def test_another_key_converts_again(tmp_path):
    write_verilog(Adder(8), "adder", tmp_path, key={"width": 8})
    v = write_verilog(Adder(12), "adder", tmp_path, key={"width": 12})
    assert "[12:0]" in v.read_text()
    with pytest.raises(TypeError):  # width 8 is no longer what the file holds: a conversion, which fails
        write_verilog(Unconvertible(), "adder", tmp_path, key={"width": 8})


def test_a_changed_source_file_converts_again(tmp_path):
    src = tmp_path / "top.py"
    src.write_text("# version 1\n")
    write_verilog(Adder(8), "adder", tmp_path / "out", key={}, sources=[src])
    write_verilog(Unconvertible(), "adder", tmp_path / "out", key={}, sources=[src])  # a hit
    src.write_text("# version 2\n")
    v = write_verilog(Adder(9), "adder", tmp_path / "out", key={}, sources=[src])
    assert "[9:0]" in v.read_text()


def test_an_edited_verilog_file_is_written_again(tmp_path):
    v = write_verilog(Adder(8), "adder", tmp_path, key={"width": 8})
    good = v.read_text()
    v.write_text(good.replace("module adder", "module edited"))
    assert write_verilog(Adder(8), "adder", tmp_path, key={"width": 8}).read_text() == good


def test_without_a_key_it_always_converts(tmp_path):
    write_verilog(Adder(8), "adder", tmp_path)
    assert not (tmp_path / "adder.v.key").exists()
    v = write_verilog(Adder(10), "adder", tmp_path)
    assert "[10:0]" in v.read_text()


def test_the_fingerprint_covers_the_source_trees():
    trees = {t.name for t in build_cache.SOURCE_TREES}
    assert {"rtl", "atomflash", "soc", "boards"} <= trees


def test_concurrent_callers_convert_once(tmp_path, monkeypatch):
    """Two callers at once (two pytest-xdist workers, or a worker and the SoC build): the second waits
    for the first's conversion and takes it from the cache."""
    import threading
    import time

    from amaranth.back import verilog

    real, calls = verilog.convert, []

    def slow_convert(*args, **kwargs):
        calls.append(threading.current_thread().name)
        time.sleep(0.5)                      # the other caller arrives while this one converts
        return real(*args, **kwargs)

    monkeypatch.setattr(verilog, "convert", slow_convert)
    paths = []
    threads = [threading.Thread(target=lambda: paths.append(write_verilog(Adder(6), "adder6", tmp_path,
                                                                          key={"width": 6})), name=f"t{i}")
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1, calls
    assert len(paths) == 2 and paths[0] == paths[1] and "module adder6" in paths[0].read_text()
