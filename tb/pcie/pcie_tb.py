"""PcieTB lives in ``sim/pcie/pcie_tb.py`` (the benches use it too); the tests import it from here."""

from sim.pcie.pcie_tb import (HIGH_BASE, HIGH_SIZE, MPS_CODE, RECORDER_BASE, RECORDER_SIZE, REGS,  # noqa: F401
                              PcieTB, RecordingRegion, tlp_split)
