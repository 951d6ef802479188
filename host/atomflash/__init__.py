"""atomflash: host library, specification and reference models for the
atomflash transactional flash-SSD controller."""

__version__ = "0.1.0"
