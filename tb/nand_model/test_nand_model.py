"""pytest entry for the NAND behavioural model (sim/nand_model).

One Verilator build (``nand_model``: the model + a two-target channel
harness) serves every cocotb module; each module runs in its own simulator
process so pytest-xdist spreads them over the cores.  Python-only checks of
atomflash.nandsim sit at the bottom.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atomflash import nandsim, spec
from sim.harness import runner

HERE = Path(__file__).resolve().parent
MODEL = runner.ROOT / "sim" / "nand_model"
BUILD_NAME = "nand_model"


def build_args() -> list[str]:
    gen = nandsim.write_header(runner.GEN)
    return ["--timing", str(MODEL / "nand_model.cpp"),
            "-CFLAGS", f"-I{gen.parent} -I{MODEL} -O2"]


def run_cocotb(module: str, workdir: Path, *, testcase=None, plusargs=(), configs=None) -> Path:
    """Run cocotb ``module`` against the shared build with configs in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for target in (0, 1):
        cfg = (configs or {}).get(target) or nandsim.NandConfig(image=workdir / f"boot.t{target}.img")
        cfg.write(workdir / f"nand{target}.cfg")
    return runner.run(
        toplevel="tb_nand_model",
        sources=[MODEL / "nand_model.sv", HERE / "tb_nand_model.sv"],
        test_module=module,
        build_name=BUILD_NAME,
        test_dir=HERE,
        build_args=build_args(),
        testcase=testcase,
        plusargs=[f"+nandtb_dir={workdir}", f"+nand0_config={workdir / 'nand0.cfg'}",
                  f"+nand1_config={workdir / 'nand1.cfg'}", *plusargs],
    )


@pytest.mark.parametrize("module", ["cocotb_commands", "cocotb_timing", "cocotb_media", "cocotb_power", "cocotb_multiplane"])
def test_nand_model(module, tmp_path):
    run_cocotb(module, tmp_path)


def test_nvddr2(tmp_path):
    # NV-DDR2 mode 7 moves a byte every 2.5 ns: sample at 1.25 ns.
    run_cocotb("cocotb_nvddr2", tmp_path, plusargs=["+clk_period_ps=1250"])


def test_strict_mode_is_fatal(tmp_path, capfd):
    # $fatal aborts the simulator: cocotb's runner reports that as SystemExit.
    with pytest.raises((AssertionError, SystemExit)):
        run_cocotb("cocotb_timing", tmp_path, testcase="strict_mode_stops_on_violation",
                   plusargs=["+nandtb_strict=1"])
    out = capfd.readouterr().out
    assert "tWP measured 30.000 ns < required 50.000 ns" in out
    assert "strict mode" in out


def test_restart_on_the_same_image_across_processes(tmp_path):
    """Cut, restart; kill the simulator mid-program, restart: completed work survives, the rest is torn."""
    persist = ["+nandtb_persist=1"]
    run_cocotb("cocotb_power", tmp_path, testcase="persist_1_write_and_cut", plusargs=persist)
    with pytest.raises((AssertionError, SystemExit)):  # the simulator is killed: no results
        run_cocotb("cocotb_power", tmp_path, testcase="persist_2_kill_mid_program", plusargs=persist)
    run_cocotb("cocotb_power", tmp_path, testcase="persist_3_check", plusargs=persist)


# -- atomflash.nandsim without a simulator --------------------------------------


def test_config_text_round_trip(tmp_path):
    cfg = nandsim.write_config(tmp_path / "c.cfg", "realistic", image=tmp_path / "x.img",
                               bad_blocks=[(0, 1), (0, 9)], fail_program_nth=[3, 5], bit_error_rate=1e-4)
    text = (tmp_path / "c.cfg").read_text()
    assert text.splitlines()[1] == "profile = realistic", "profile first: later keys override it"
    kv = dict(line.split(" = ", 1) for line in text.splitlines()[1:])
    assert kv["page_data"] == "4096" and kv["bad_blocks"] == "0:1,0:9" and kv["fail_program_nth"] == "3,5"
    assert float(kv["bit_error_rate"]) == 1e-4
    assert set(kv) == {k for k, *_ in nandsim.CONFIG_KEYS}
    assert cfg.stats_path() == tmp_path / "x.img.stats.json"
    with pytest.raises(KeyError):
        nandsim.NandConfig(no_such_key=1)


def test_header_declares_every_key():
    text = nandsim.generate_header()
    for key, typ, _, _ in nandsim.CONFIG_KEYS:
        assert f'if (key == "{key}")' in text
    assert "AF_NANDCTL_RELOAD" in text and "af_nandimg_page_t" in text


@pytest.mark.parametrize("profile", sorted(spec.NAND_PROFILES))
def test_oob_kind_column_follows_the_page_layout(profile):
    """The model reads the OOB record's kind at the column spec.nand_page_layout puts it
    (no parity in between), from the generated header; Image.oob reads the record there."""
    prof = spec.NAND_PROFILES[profile]
    lay = spec.nand_page_layout(prof)
    col = lay.oob_record_col + spec.OOB["kind"].offset
    assert nandsim.oob_kind_column(prof.page_data) == col
    assert lay.parity_col >= lay.oob_record_col + spec.OOB.size, "parity after the record"
    assert f"#define AF_NANDMODEL_OOB_KIND_SPARE_OFF {col - prof.page_data}u" in nandsim.generate_header()


def test_image_oob_reads_the_record(tmp_path):
    cfg = nandsim.NandConfig("small")
    lay = spec.nand_page_layout(spec.NAND_PROFILES["small"])
    rec = spec.pack_oob(kind=int(spec.Kind.COMMIT), seq=7)
    page = bytearray(b"\xff" * cfg.geometry.page_bytes)
    page[lay.oob_record_col:lay.oob_record_col + len(rec)] = rec
    with nandsim.Image.create(tmp_path / "x.img", cfg) as img:
        img.program(0, 1, 0, bytes(page))
        assert img.oob(0, 1, 0) == rec and spec.unpack_oob(img.oob(0, 1, 0)).kind == spec.Kind.COMMIT


def test_image_reader_rejects_foreign_files(tmp_path):
    p = tmp_path / "junk.img"
    p.write_bytes(b"\0" * 8192)
    with pytest.raises(ValueError, match="not a NAND model image"):
        nandsim.Image(p)


def test_image_layout_and_rows():
    g = nandsim.NandConfig("small").geometry
    boff, poff, doff, size = g.layout()
    assert boff == 4096 and poff % 4096 == 0 and doff % 4096 == 0
    assert size == doff + g.pages * g.page_bytes
    assert g.row(0, 1, 0) == 64 and g.row(0, 3, 5) == 3 * 64 + 5


@pytest.mark.parametrize("ppb", [4, 8, 64, 128])
def test_mlc_pairing_is_a_partition(ppb):
    uppers = [p for p in range(ppb) if nandsim.paired_lower(p, ppb) is not None]
    lowers = [nandsim.paired_lower(p, ppb) for p in uppers]
    assert sorted(uppers + lowers) == list(range(ppb))
    assert all(lo < up for lo, up in zip(lowers, uppers)), "a lower page is programmed before its upper page"
