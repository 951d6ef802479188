"""The whole NVMe drive in simulation: ``rtl.nvme.drive.NvmeDrive`` with its NAND models and SoC
memory, behind the simulated PCIe endpoint of ``sim/pcie``, as one Verilator top that
cocotbext-pcie's root complex drives (:mod:`sim.nvme.gen`).  The testbench is ``tb/nvme``; the
design note is docs/nvme.md ("Simulation")."""
