"""The campaign's verdict on a recovered device (sim/campaign/judge.py, ``verify_recovered``),
against a stand-in device: what a refusal of new work after recovery means
depends on whether the trial could have lost a block.  Pure Python: no
simulation."""

from pathlib import Path

import pytest

from atomflash import errors, spec
from sim.campaign import draw, report
from sim.campaign import judge as campaign_judge   # the fixture below is judge


class RefusingDevice:
    """A recovered device that refuses every write with NO_SPACE for ``why`` and reads what it held
    (``refuse=False``: takes writes)."""
    lba_size = 16
    capacity = 1000

    def __init__(self, why: spec.NoSpace, held: bytes = b"\x5a" * 16, refuse: bool = True):
        self.why, self.held, self.t, self.refuse = why, held, None, refuse

    def read(self, lba, nlb=1):
        return self.held * nlb

    def write(self, lba, data):
        if not self.refuse:
            self.held = data
            return
        raise errors.BY_STATUS[spec.Status.NO_SPACE]("write")

    def stats(self):
        return {"no_space": int(self.why), "spare_blocks": 2}

    def close(self):
        pass


@pytest.fixture
def judge(monkeypatch):
    """``judge(faults, why)``: the result ``verify_recovered`` leaves for a trial with ``faults`` whose recovered
    device refuses new work for ``why`` (every LBA of the span as the model expects); ``before``: what the
    workload left in the result; ``refuse=False``: the device takes the probe write."""
    def run(faults: str, why: spec.NoSpace, before: dict | None = None, refuse: bool = True) -> dict:
        dev = RefusingDevice(why, refuse=refuse)
        monkeypatch.setattr(campaign_judge.Device, "attach_sim", staticmethod(lambda run, timeout: dev))
        monkeypatch.setattr(campaign_judge.simctl, "boot_report", lambda run: "recovery: 0 pages\n")
        monkeypatch.setattr(campaign_judge.simctl, "bus_errors", lambda t, run: 0)
        monkeypatch.setattr(campaign_judge, "read_span", lambda dev, span: {})
        monkeypatch.setattr(campaign_judge, "verify", lambda history, recovered, **kw: [])
        res = {"cut_seen": True, **(before or {})}
        campaign_judge.verify_recovered(draw.Trial(7, 7, "program", 40, faults), Path("."), None, {}, res)
        return res
    return run


@pytest.mark.parametrize("faults", ["", "bits"])
def test_full_on_a_device_that_lost_no_block_is_a_violation(judge, faults):
    res = judge(faults, spec.NoSpace.FULL)
    assert res["outcome"] == "violation"
    assert "FULL without a grown bad block" in res["detail"] and "spare_blocks 2" in res["detail"]


@pytest.mark.parametrize("faults", ["program", "erase", "bits,program,erase"])
def test_full_after_injected_failures_is_an_answer(judge, faults):
    res = judge(faults, spec.NoSpace.FULL)
    assert res["outcome"] == "pass" and res["no_space"] == "after recovery: FULL"


@pytest.mark.parametrize("faults", ["", "bits", "mlc"])
def test_gc_stuck_below_capacity_without_injected_failures_is_a_violation(judge, faults):
    # whatever the host left open (an append never remapped, a transaction), a drive that lost no block
    # and holds less than its capacity keeps taking writes
    res = judge(faults, spec.NoSpace.GC_STUCK)
    assert res["outcome"] == "violation" and res["no_space_episodes"] == 1
    assert "1 NO_SPACE episode(s) with 0 of 1000 LBAs stored" in res["detail"], res["detail"]
    assert "after recovery: GC_STUCK" in res["detail"]


@pytest.mark.parametrize("faults", ["program", "erase"])
def test_gc_stuck_after_injected_failures_is_an_answer(judge, faults):
    res = judge(faults, spec.NoSpace.GC_STUCK)
    assert res["outcome"] == "pass" and res["no_space"] == "after recovery: GC_STUCK"
    assert res["no_space_episodes"] == 1


def test_a_workload_that_met_no_space_counts_an_episode_and_fails_below_capacity(judge):
    # the workload's NO_SPACE (the device then took the probe write): one episode, a violation
    res = judge("", spec.NoSpace.NONE, before={"no_space": "workload: atomic: the device is out of space",
                                                "no_space_episodes": 1, "no_space_stored": 40, "capacity": 1000},
                refuse=False)
    assert res["outcome"] == "violation" and "1 NO_SPACE episode(s) with 40 of 1000 LBAs" in res["detail"]
    # at the capacity it is an answer
    res = judge("", spec.NoSpace.NONE, before={"no_space": "workload: write: the device is out of space",
                                                "no_space_episodes": 1, "no_space_stored": 1000, "capacity": 1000},
                refuse=False)
    assert res["outcome"] == "pass"


def test_no_space_below_capacity_is_judged_from_the_counts():
    t = draw.Trial(7, 7, "program", 40, "")
    assert not campaign_judge.no_space_below_capacity(t, {})
    assert campaign_judge.no_space_below_capacity(t, {"no_space_episodes": 2, "no_space_stored": 48, "capacity": 1239})
    assert not campaign_judge.no_space_below_capacity(t, {"no_space_episodes": 1, "no_space_stored": 1239,
                                                    "capacity": 1239})
    assert not campaign_judge.no_space_below_capacity(draw.Trial(7, 7, "program", 40, "bits,erase"),
                                                {"no_space_episodes": 1, "no_space_stored": 48, "capacity": 1239})


def test_a_refusal_without_a_reason_is_a_violation(judge):
    res = judge("program", spec.NoSpace.NONE)
    assert res["outcome"] == "violation" and "did not take new work" in res["detail"]


def test_the_report_splits_refusals_by_reason_and_faults(tmp_path):
    base = {"site": "program", "seed": 1, "outcome": "pass", "cut_seen": True, "in_flight": 0, "commands": 40,
            "build": "gateware-0", "wall_s": 1.0, "detail": "", "chain_start": 0}
    results = [{**base, "id": 0, "faults": "program", "no_space": "after recovery: GC_STUCK"},
               {**base, "id": 1, "faults": "", "no_space": "after recovery: GC_STUCK"},
               {**base, "id": 2, "faults": "erase", "no_space": "after recovery: FULL"},
               {**base, "id": 3, "faults": "", "no_space": "workload: write: the device is out of space",
                "outcome": "no-cut", "cut_seen": False}]
    report.report(results, tmp_path / "r.md", campaign_args())
    text = (tmp_path / "r.md").read_text()
    assert "4 of these trials ran out of space" in text and "1 of them during the workload" in text
    assert ("After recovery: FULL 1 (1 with program or erase failures injected, 0 without); "
            "GC_STUCK 2 (1 with program or erase failures injected, 1 without: trial 1).") in text


def campaign_args():
    from types import SimpleNamespace
    return SimpleNamespace(count=4, seed=1, commands=40, faults="mix", fresh=False)


def test_a_probe_write_that_hangs_takes_the_consoles_stats_and_gc_with_it(monkeypatch):
    class HangingDevice(RefusingDevice):
        def write(self, lba, data):
            raise TimeoutError("no completion within 300 s (in flight: WRITE cid 6 (queue 0))")

    asked = []

    def console(line, run, timeout):
        asked.append(line)
        if line == "gc":
            raise campaign_judge.simctl.SimError("console: no prompt after 'gc'")
        return f"{line}: no_space NONE"

    dev = HangingDevice(spec.NoSpace.NONE)
    monkeypatch.setattr(campaign_judge.Device, "attach_sim", staticmethod(lambda run, timeout: dev))
    monkeypatch.setattr(campaign_judge.simctl, "boot_report", lambda run: "")
    monkeypatch.setattr(campaign_judge.simctl, "console_command", console)
    monkeypatch.setattr(campaign_judge, "read_span", lambda dev, span: {})
    monkeypatch.setattr(campaign_judge, "verify", lambda history, recovered, **kw: [])
    with pytest.raises(TimeoutError) as e:
        campaign_judge.verify_recovered(draw.Trial(7, 7, "program", 40, ""), Path("."), None, {}, {"cut_seen": True})
    assert asked == ["stats", "gc"]
    assert "in flight: WRITE cid 6" in str(e.value) and "stats: no_space NONE" in str(e.value)
    assert "gc: no answer (console: no prompt after 'gc')" in str(e.value)
