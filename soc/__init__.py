"""atomflash LiteX SoC: CPU, memories, console, the controller core, sim and board targets."""
