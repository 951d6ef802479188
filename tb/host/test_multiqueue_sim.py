"""Two host queues of the simulated SSD at once (the default SoC: 2 host
queue pairs + the firmware's): `atomflash.Device.attach_sim_all` on the one
host-port connection, each queue in its own slice of host memory (a
maximum-size transfer on the upper one), then the interleaved random
workload (`atomflash.workload`) with commands in flight on both queues, a
power cut in the middle of it, recovery, and the model's oracle on what the
device shows."""

from __future__ import annotations

import random
import time

import pytest

from atomflash import simctl
from atomflash.device import Device, DeviceError, hostmem_slices
from atomflash.transport import TransportError
from atomflash.workload import Recorder, random_workload, read_span, verify

pytestmark = pytest.mark.soc

SPAN = 32
STEPS = 45
CUT_AFTER = 30     # workload steps before the power goes


@pytest.mark.slow      # ~2 min: make test-slow: the quick campaign's workload runs on every host queue in make test
def test_two_host_queues_interleaved_then_a_power_cut(tmp_path):
    run = tmp_path / "run"
    cfg = simctl.SimConfig()
    t0 = time.monotonic()

    def phase(name):
        print(f"{time.monotonic() - t0:6.1f} s  {name}")

    simctl.start(run, cfg, fresh=True)
    phase("booted")
    try:
        with pytest.raises(DeviceError, match="queue pair 2 is not a host queue"):
            Device.attach_sim(run, qid=2, timeout=120)
        devs = Device.attach_sim_all(run, timeout=300)
        a, b = devs
        assert (a.qid, b.qid, a.host_queues, a.queue_pairs) == (0, 1, 2, 3)
        assert a.t is b.t
        assert [(d.mem_base, d.mem_size) for d in devs] == hostmem_slices(a.layout, 2)
        assert b.mem_base + b.mem_size <= a.layout.hostmem_base + a.layout.hostmem_size
        n, big = a.lba_size, a.info.max_transfer
        # the largest transfer fits each queue's slice; both queues in flight together
        data = bytes(random.Random(1).randbytes(big * n))
        cb = b.submit_write(SPAN, data)
        ca = a.submit_write(0, b"q0" * (n // 2))
        devs.wait_all()
        assert ca.ok and cb.ok
        assert b.read(SPAN + big - 2, 2) == data[-2 * n:] and a.read(0) == b"q0" * (n // 2)

        phase("a maximum transfer on queue 1 beside queue 0")
        rec = Recorder(devs, initial={0: b"q0" * (n // 2)})

        def on_step(step, what):
            if step + 1 == CUT_AFTER:
                simctl.stop(run, power_cut=True)      # the power goes with commands in flight

        with pytest.raises(TransportError):
            random_workload(rec, random.Random(9), commands=STEPS, span=SPAN, salt=9, on_step=on_step)
        c = rec.counts
        print(f"workload until the cut: {c}; in flight at the cut: {len(rec.pending)}")
        assert c.per_queue.get(0, 0) >= 10 and c.per_queue.get(1, 0) >= 10, c
        assert c.overlapped >= 10, f"the queues never had commands in flight together: {c}"
        devs.close()
        simctl.wait_exit(run, timeout=120)
        phase("workload, cut")

        simctl.start(run, cfg)
        phase("rebooted")
        devs = Device.attach_sim_all(run, timeout=300)
        recovered = read_span(devs[1], SPAN)
        violations = verify(rec.model.history, recovered, lba_size=n, initial=rec.model.initial)
        assert violations == [], "\n".join(map(str, violations[:10]))
        # both queues take new work after recovery
        devs[1].write(SPAN + 1, b"n1" * (n // 2))
        assert devs[0].read(SPAN + 1) == b"n1" * (n // 2)
        devs.close()
        phase("verified, new work")
    finally:
        simctl.stop(run, power_cut=True)
