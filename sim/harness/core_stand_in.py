"""The FTL core's stream front end, played by the reference model, for pysim benches of what sits in front.

:class:`FtlCoreStandIn` serves a ``core_cmd``/``core_cpl`` pair (``rtl.ftl.core.FtlCore``'s stream front
end, as the NVMe command translator drives it): it takes each command with random backpressure,
judges it as the core's validator does (``atomflash.command.static_status``), runs it on a
:class:`~atomflash.model.semantics.Model` with its data read from and written to SoC memory (a
``sim.harness.wbmem.WishboneMemoryModel``'s bench view), and completes it after a random delay, in
any order.  It checks that no command id is issued twice while in flight.
"""

from __future__ import annotations

import random
from collections import Counter

from atomflash import command, spec
from atomflash.model.semantics import Model
from atomflash.spec import Opcode, Status

__all__ = ["FtlCoreStandIn"]


class FtlCoreStandIn:
    """Answers ``core_cmd``/``core_cpl`` from ``model``; see the module docstring.

    Parameters
    ----------
    core_cmd, core_cpl : the ports of the block in front (its ``core_cmd`` Out, ``core_cpl`` In).
    model : Model
        What the core keeps (its limits give the block size and capacity).
    soc : WishboneMemoryModel
        SoC memory, where ``buf`` and ``list`` point.
    ids : int
        Command ids that may be in flight at once (``cid`` below this).
    """

    def __init__(self, core_cmd, core_cpl, model: Model, soc, *, ids: int, seed: int = 0,
                 static: command.StaticLimits = command.StaticLimits()):
        self.core_cmd, self.core_cpl, self.model, self.soc = core_cmd, core_cpl, model, soc
        self.ids, self.static = ids, static
        self.rng = random.Random(seed)
        self.busy: set[int] = set()
        self.seen = Counter()

    def run(self, raw: int, queue: int = 0) -> tuple[int, int]:
        """One command (``spec.CMD`` as an integer) from core queue ``queue``: its (status, result).
        Transactions and appends are the queue's that opened them (docs/security.md)."""
        c = spec.CMD.unpack(raw.to_bytes(spec.CMD.size, "little"))
        status = command.static_status(c, self.model.limits.capacity, self.static)
        if status != Status.SUCCESS:
            return status, 0
        model, B, soc = self.model, self.model.limits.lba_size, self.soc
        op = Opcode(c.opcode)
        flags = spec.CMD.decompose("flags", c.flags)
        self.seen[op.name] += 1
        if op == Opcode.FLUSH:
            r = model.flush()
        elif op == Opcode.WRITE:
            r = model.write(c.lba, soc.read(c.buf, c.nlb * B), fua=bool(flags.fua))
        elif op in (Opcode.READ, Opcode.TX_READ):
            r = model.read(c.lba, c.nlb) if op == Opcode.READ else model.tx_read(c.tid, c.lba, c.nlb, queue=queue)
            if r.ok:
                soc.write(c.buf, r.data)
        elif op == Opcode.DEALLOCATE:
            r = model.trim(c.lba, c.nlb, fua=bool(flags.fua))
        elif op == Opcode.ATOMIC_WRITE:
            size = spec.ATOMIC_ENTRY.size
            entries = [spec.ATOMIC_ENTRY.unpack(soc.read(c.list + size * i, size)) for i in range(c.nlist)]
            r = model.atomic_write([(e.lba, soc.read(e.buf, B)) for e in entries])
        elif op == Opcode.TX_WRITE:
            r = model.tx_write(c.tid, c.lba, soc.read(c.buf, c.nlb * B), final=bool(flags.tx_final),
                               new=bool(flags.tx_new), queue=queue)
        elif op == Opcode.TX_COMMIT:
            r = model.tx_commit(c.tid, queue=queue)
        elif op == Opcode.TX_ABORT:
            r = model.tx_abort(c.tid, queue=queue)
        elif op == Opcode.APPEND:
            r = model.append(soc.read(c.buf, c.nlb * B), queue=queue)
        elif op == Opcode.REMAP:
            size = spec.REMAP_ENTRY.size
            entries = [spec.REMAP_ENTRY.unpack(soc.read(c.list + size * i, size)) for i in range(c.nlist)]
            r = model.remap([(e.lba, e.token, e.nlb) for e in entries], queue=queue)
        elif op == Opcode.RELEASE:
            r = model.release(c.token, queue=queue)
        elif op == Opcode.HINT:
            r = model.hint(c.hint)
        else:
            raise AssertionError(f"the core was sent {op.name}, which only its firmware queue may send")
        return r.status, r.result

    async def process(self, ctx):
        """The pysim process: ``sim.add_process(stand_in.process)``."""
        cmd, cpl, rng = self.core_cmd, self.core_cpl, self.rng
        waiting = []                     # [cycles left, sqid, cid, status, result]
        offered = None
        ctx.set(cmd.ready, 1)
        async for _, _, valid, ready, sqid, raw, cpl_ready in ctx.tick().sample(
                cmd.valid, cmd.ready, cmd.payload.sqid, cmd.payload.cmd.as_value(), cpl.ready):
            if valid and ready:
                cid = raw >> 16 & 0xFFFF
                assert cid < self.ids and cid not in self.busy, f"command id {cid} issued twice"
                self.busy.add(cid)
                status, result = self.run(raw, sqid)
                waiting.append([rng.choice([0, 1, 5, 20, 60]), sqid, cid, status, result])
            if offered is not None and cpl_ready:
                self.busy.discard(offered[2])
                waiting.remove(offered)
                offered = None
                ctx.set(cpl.valid, 0)
            for w in waiting:
                w[0] -= 1
            due = [w for w in waiting if w[0] <= 0]
            if offered is None and due:
                offered = rng.choice(due)
                ctx.set(cpl.payload, {"sqid": offered[1], "cid": offered[2], "status": offered[3],
                                      "result": offered[4]})
                ctx.set(cpl.valid, 1)
            ctx.set(cmd.ready, int(rng.random() > 0.2))
