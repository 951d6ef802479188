"""SATA device-role stack (docs/sata.md): phy.py (OOB, ALIGNs) and link.py (primitives, frames)."""
