"""Waiting many clock cycles without waking Python on each one.

cocotb 1.9's ``ClockCycles(clk, n)`` resumes the waiting coroutine on every
one of the n edges; a testbench that polls every 64 cycles from two
coroutines spends most of its time in cocotb's scheduler (the FTL core's
random scoreboard: 3 M resumes, ~100 s of Python).  :func:`cycles` waits on
one timer and realigns to the clock.
"""

from __future__ import annotations

from cocotb.triggers import ClockCycles, RisingEdge, Timer


async def cycles(clk, n: int, period_ps: int) -> None:
    """Until a rising edge of ``clk`` about ``n`` cycles from now: exactly the
    n-th when called on a rising edge, else within one cycle of it.  For
    polling and idle gaps, not where a test counts cycles."""
    if n <= 2:
        if n > 0:
            await ClockCycles(clk, n)
        return
    await Timer(n * period_ps - period_ps // 2, "ps")   # half a cycle short, then the edge itself
    await RisingEdge(clk)
