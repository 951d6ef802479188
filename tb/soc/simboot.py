"""Moved to ``sim/simboot.py`` (the SoC tests and ``sim/bench_soc.py`` share it).

This alias remains only for ``test_soc_liveness.py`` (``from .simboot import``);
when that import names ``sim.simboot``, delete this file."""

from sim.simboot import CLK_HZ, DEFAULT_WAYS, ROOT, TARGETS, boot, build, model_configs  # noqa: F401
