"""NvmeDriveTB lives in ``sim/nvme/drive_tb.py`` (the benches use it too); the tests import it from here."""

from sim.nvme.drive_tb import FW, NVME, DrivePcieTB, NvmeDriveTB, fw_bits, start_drive  # noqa: F401
