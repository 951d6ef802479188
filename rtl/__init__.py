"""atomflash gateware (Amaranth 0.5)."""
