"""Small shared gateware pieces that amaranth.lib does not provide."""
