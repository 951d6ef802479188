"""Wishbone accesses from an amaranth.sim testbench (``sim/harness/wishbone.py``
is the cocotb one)."""


async def wb_access(ctx, wb, byte_addr: int, data: int | None = None, sel: int = 0xF, timeout: int = 16) -> int:
    """One classic-Wishbone cycle on target ``wb`` (word addressed): a write
    when ``data`` is given, else a read.  Returns ``dat_r`` of the ack cycle;
    fails when no ack comes within ``timeout`` cycles."""
    ctx.set(wb.adr, byte_addr // 4)
    ctx.set(wb.we, data is not None)
    ctx.set(wb.dat_w, data or 0)
    ctx.set(wb.sel, sel)
    ctx.set(wb.cyc, 1)
    ctx.set(wb.stb, 1)
    for _ in range(timeout):
        await ctx.tick()
        if ctx.get(wb.ack):
            value = ctx.get(wb.dat_r)
            ctx.set(wb.cyc, 0)
            ctx.set(wb.stb, 0)
            await ctx.tick()
            return value
    raise AssertionError(f"no ack at 0x{byte_addr:x}")
