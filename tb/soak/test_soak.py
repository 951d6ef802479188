"""The liveness soak (`sim/soak.py`, `make soak`).

* The short version on the simulated SoC (``--quick``, in `make test`): a fresh drive of 4 blocks per
  LUN (320 LBAs, one block of over-provisioning: the smallest, where GC is hardest) filled to 90 % of its capacity, then the mixed workload -- the ledger's atomic writes and transactions on host queue 0,
  the key-value store's appends, remaps, releases and trims on queue 1, filler writes on both, several
  commands in flight -- cut by NAND cuts inside COMMIT-record programs and by the host, each epoch
  judged by the model's oracle after the recovering boot: no violation, no NO_SPACE, GC at work.
* Without a simulation: the judgement of an epoch's record, the layout, the cut plan, the report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "sim"))

import soak  # noqa: E402


@pytest.mark.soc
@pytest.mark.long
def test_quick_soak_at_90_percent_keeps_taking_writes_and_loses_nothing(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "sim" / "soak.py"), "--quick", "--dir", str(tmp_path / "s"),
                        "--report", str(tmp_path / "soak.md")],
                       capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL)
    epochs = [json.loads(line) for line in (tmp_path / "s" / "90" / "epochs.jsonl").read_text().splitlines()]
    report = (tmp_path / "soak.md").read_text() if (tmp_path / "soak.md").exists() else ""
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    capacity = json.loads((tmp_path / "s" / "90" / "identify.json").read_text())["capacity"]
    work = [e for e in epochs if e["site"] != "fill"]
    assert epochs[0]["site"] == "fill" and epochs[0]["live_lbas"] >= 0.88 * capacity, epochs[0]
    assert len(work) >= 2 and sum(e["commands"] for e in work) >= soak.QUICK["ops"], work
    assert all(e["judged"] and not e["violations"] for e in epochs), epochs
    assert not any(e["no_space"] or e["hang"] or e["mismatch"] or e["error"] for e in epochs), epochs
    assert any(e["cut"] == "nand" for e in work), [e["cut"] for e in work]   # a COMMIT program was torn
    assert all(e["live_lbas"] >= 0.85 * capacity for e in work), [e["live_lbas"] for e in work]
    assert sum(e["overlapped"] for e in work) >= 50, work        # both queues had commands in flight together
    kinds = {k for e in work for k in e["programs"]}
    assert {"ledger atomic", "ledger tx commit", "ledger tx final", "kv put", "kv batch put", "kv delete",
            "filler write"} <= kinds, kinds
    assert sum(e["gc_copies"] for e in epochs) > 0, epochs        # GC had to move data at this fill
    assert "| NO_SPACE episodes (below capacity) | 0 (0) |" in report and "| verdict | passed |" in report, report


def epoch(**kw) -> dict:
    e = {"n": 3, "site": "kind:commit", "commands": 400, "cut": "nand", "judged": True, "violations": [],
         "no_space": {}, "hang": "", "mismatch": "", "error": "", "live_lbas": 1100, "programs": {"kv put": 3},
         "gc_copies": 7, "flash_programs": 900, "flash_erases": 9, "host_pages": 600, "sim_cycles": 10**7,
         "acknowledged": 398, "overlapped": 100, "in_flight_at_cut": 2, "boot_cut_came": ""}
    e.update(kw)
    return e


def test_an_epoch_fails_on_each_broken_promise():
    assert soak.failure(epoch()) == ""
    assert "oracle: 1 violations" in soak.failure(epoch(violations=["lost: lba 3 op 9: ..."]))
    assert "mismatch" in soak.failure(epoch(mismatch="read 4: the device's data differ"))
    assert soak.failure(epoch(stale_checkpoints=["checkpoint 38 names LBA 363 vseq 1 at PPA 0x0400142a, ..."])) \
        .startswith("stale checkpoint: checkpoint 38 names LBA 363")
    ns = {"command": "append (queue 1): the device is out of space", "fill": 0.07, "live_lbas": 83,
          "capacity": 1239, "get_log": {"no_space": "GC_STUCK"}}
    assert soak.failure(epoch(no_space=ns)).startswith("NO_SPACE (GC_STUCK) at 7% of the capacity (83 of 1239")
    assert soak.failure(epoch(hang="no completion within 240 s")).startswith("hang")
    assert soak.failure(epoch(judged=False)) == "not judged"   # an epoch never read back is not a pass


def test_the_summary_counts_no_space_below_capacity_and_write_amplification():
    ns = {"command": "atomic (queue 0): the device is out of space", "fill": 0.5, "live_lbas": 620,
          "capacity": 1239, "below_capacity": True, "get_log": {"no_space": "GC_STUCK"}, "refused": 2,
          "open_tx": 1, "live_appends": 2, "console": {"gc": "gc policy greedy"}, "console_gc_lines": ["gc: x"]}
    epochs = [epoch(n=0, site="fill", programs={}), epoch(n=1), epoch(n=2, no_space=ns, boot_cut_came="during boot")]
    s = soak.summarize("50", 0.5, epochs, {"capacity": 1239, "clk_hz": 100_000_000})
    assert (s["epochs"], s["commands"], s["no_space"], s["no_space_below"], s["boot_cuts"]) == (2, 800, 1, 1, 1)
    assert s["cuts"] == 2 + 1 + 1 and s["gc_copies"] == 21 and s["flash_programs"] == 1800
    text = soak.report_text([s], type("A", (), {"levels": "50", "ops": 800, "seed": 1})(), 1239)
    assert "| write amplification (programs / host pages) | 1.50 |" in text
    assert "| NO_SPACE episodes (below capacity) | 1 (1) |" in text and "| verdict | FAILED |" in text
    assert "The first NO_SPACE, epoch 2" in text and '"no_space": "GC_STUCK"' in text


def test_the_report_replaces_only_its_own_section(tmp_path):
    doc = tmp_path / "soak.md"
    doc.write_text(f"# Soak\n\nprose before\n\n{soak.FIGURES_BEGIN}\nold figures\n{soak.FIGURES_END}\n\nprose after\n")
    soak.write_report(doc, f"{soak.FIGURES_BEGIN}\nnew figures\n{soak.FIGURES_END}")
    text = doc.read_text()
    assert "prose before" in text and "prose after" in text and "new figures" in text and "old" not in text


def test_layout_holds_the_fill_level_and_the_cut_plan_is_fixed_by_the_seed():
    for target in (0.5, 0.9):
        lay = soak.Layout(1239, target)
        assert abs(lay.end - target * 1239) <= 1 and lay.filler_start == soak.ACCOUNTS + soak.KEYS * soak.KEY_SLOT
    a = [soak.Epoch.draw(n, 1, "90") for n in range(12)]
    b = [soak.Epoch.draw(n, 1, "90") for n in range(12)]
    assert a == b and a[0].site == "fill" and {e.site for e in a[1:]} == set(soak.SITES)
    assert all(e.arm or e.host_cut_at for e in a)        # every epoch ends in a cut
    assert any(e.boot_cut for e in a)
    # a NAND cut is armed part way into its epoch, leaving the rest of the budget for it to come in
    for e in a[1:]:
        if e.arm:
            assert e.budget * 2 // 5 <= e.arm_after <= e.budget * 4 // 5, e
        else:
            assert e.arm_after == 0
    assert all(e.arm_after == 0 for e in (soak.Epoch.draw(n, 1, "90", first=True) for n in range(12)))


def test_the_tool_imports_nothing_from_tb():
    text = (ROOT / "sim" / "soak.py").read_text()
    assert "from tb" not in text and "import tb" not in text


def test_a_hang_records_the_core_registers_and_what_moved():
    """The hang's diagnosis reads the FTL registers and the queue indices through the host link, twice
    (here on the fake SSD of tb/host, whose window reads 0 but whose queue 0 moves)."""
    sys.path.insert(0, str(ROOT / "host"))
    from atomflash.device import Device
    from atomflash.transport import UartBoneTransport
    from tb.host.test_device_queues import LAYOUT, FakeSsd

    fake = FakeSsd()
    t = UartBoneTransport(fake.port, timeout=10)
    try:
        dev = Device(t, LAYOUT, timeout=30)
        regs = soak.core_registers(dev, 0x100, apart_s=0.0)
        assert {"status", "seq_next_lo", "nand_programs", "reloc_lba", "q0", "q1"} <= set(regs["first"])
        assert "ctrl" not in regs["first"] and "free" not in regs["first"]   # write-only: never read
        assert regs["changed"] == {}
        dev.write(3, bytes(dev.lba_size))
        moved = soak.core_registers(dev, 0x100, apart_s=0.0)["first"]["q0"]
        assert moved["sq_tail"] == regs["first"]["q0"]["sq_tail"] + 1
    finally:
        t.close()


def test_a_level_soaked_by_a_child_gets_every_option_of_the_parents():
    parent = soak.parser().parse_args(["--levels", "50,90", "--ops", "123", "--seed", "7", "--dir", "/x",
                                       "--blocks-per-lun", "6", "--keep-images", "--jobs", "2"])
    child = soak.parser().parse_args(soak.child_args("90", parent, Path("/gw")))
    assert child.levels == "90" and child.gateware == Path("/gw")
    own = {"levels", "jobs", "report", "fresh", "gateware"}      # the parent's own, or set per child
    differ = {k for k, v in vars(parent).items() if k not in own and getattr(child, k) != v}
    assert not differ, differ
    assert set(vars(parent)) - own == {"ops", "seed", "dir", "blocks_per_lun", "keep_images", "quick"}
