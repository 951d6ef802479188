"""Host queue front-end (rtl/host/queues.py) under cocotb on Verilator: the
default four queue pairs, and three (not a power of two: the SoC's two host
queues and the firmware's)."""

from pathlib import Path

import pytest

from rtl.host.queues import HostQueues
from sim.harness import runner

HERE = Path(__file__).parent


@pytest.mark.parametrize("queue_pairs", [4, 3])
def test_host_queues(queue_pairs):
    name = "host_queues" if queue_pairs == 4 else f"host_queues_{queue_pairs}"
    verilog = runner.amaranth_verilog(HostQueues(queue_pairs=queue_pairs, max_entries=32), name)
    runner.run(toplevel=name, sources=[verilog], test_module="cocotb_host_queues",
               build_name=name, test_dir=HERE, extra_env={"AF_QUEUE_PAIRS": str(queue_pairs)})
