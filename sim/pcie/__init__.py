"""The PCIe endpoint in simulation: LitePCIe's UltraScale+ PHY with the hard
block replaced by ports (:mod:`sim.pcie.support`) and the Verilator top that
cocotbext-pcie's root complex and UltraScale+ device model drive
(:mod:`sim.pcie.gen`); the blocking NVMe host driver on that device
(:mod:`sim.pcie.nvme_host_bridge`).  The gateware is ``soc/pcie.py``; the design note is
``docs/pcie.md``."""
