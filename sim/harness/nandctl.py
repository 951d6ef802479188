"""The NAND model's control port (sim/nand_model/nand_model.sv ``ctl_*``) from cocotb."""

from cocotb.triggers import Timer

MASK64 = (1 << 64) - 1


async def model_ctl(model, period_ps: int, op: int, a0: int = 0, a1: int = 0, a2: int = 0) -> int:
    """Issue control operation ``op`` (``atomflash.nandsim.NandCtl``) to the model
    instance ``model`` and return its signed 64-bit result."""
    model.ctl_op.value = int(op)
    model.ctl_arg0.value = a0 & MASK64
    model.ctl_arg1.value = a1 & MASK64
    model.ctl_arg2.value = a2 & MASK64
    strobe = 1 - int(model.ctl_strobe.value)
    model.ctl_strobe.value = strobe
    for _ in range(100):
        await Timer(period_ps, "ps")
        if int(model.ctl_ack.value) == strobe:
            break
    else:
        raise RuntimeError("NAND model control port did not answer")
    await Timer(period_ps, "ps")
    v = int(model.ctl_result.value)
    return v - (1 << 64) if v >> 63 else v
