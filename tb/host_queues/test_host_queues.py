"""Host queue front-end (rtl/host/queues.py) under cocotb on Verilator."""

from pathlib import Path

from rtl.host.queues import HostQueues
from tb.common import runner

HERE = Path(__file__).parent


def test_host_queues():
    verilog = runner.amaranth_verilog(HostQueues(queue_pairs=4, max_entries=32), "host_queues")
    runner.run(toplevel="host_queues", sources=[verilog], test_module="cocotb_host_queues",
               build_name="host_queues", test_dir=HERE)
