"""Two front ends on one FTL core: the host queues and a stream front end (the NVMe controller).

The core's blocks know a command's queue only by its id (``sqid``): completions go back by it, and a
queue's transactions and appends are its own.  With a stream front end beside the host queues, the
ids are shared out: 0..``stream_queues`` - 1 are the stream's (the NVMe controller gives each of its
I/O queues one), the host queues' pairs follow, so the firmware's pair stays the last id, which the
executor treats as the firmware's.

:class:`FrontEndJoin` merges the two command streams (round robin) with the host queues' ids moved up,
and sends each completion back to the front end its id belongs to, the host queues' with their own ids
again.  ``hold`` (the firmware's GC short of erased blocks) holds the stream front end as the host
queues hold the host's pairs; the firmware's pair is held by neither.
"""

from amaranth import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.host.queues import command_layout, completion_layout
from rtl.lib.streams import StreamMerge

__all__ = ["FrontEndJoin"]


class FrontEndJoin(wiring.Component):
    """Joins the host queues and a stream front end on one core; see the module docstring.

    Ports
    -----
    queues_cmd : In(stream command_layout(queue_pairs)), queues_cpl : Out(stream completion_layout(queue_pairs))
        The host queues (:class:`rtl.host.queues.HostQueues`).
    stream_cmd : In(stream command_layout(ids)), stream_cpl : Out(stream completion_layout(ids))
        The stream front end; its ids are below ``stream_queues``.
    cmd : Out(stream command_layout(ids)), cpl : In(stream completion_layout(ids))
        The core's side; ``ids`` = ``stream_queues + queue_pairs``.
    hold : In(1)
        No command from the stream front end while it is up.
    """

    def __init__(self, *, stream_queues: int, queue_pairs: int):
        if stream_queues < 1 or queue_pairs < 1:
            raise ValueError("a join needs both front ends")
        self.stream_queues, self.queue_pairs = stream_queues, queue_pairs
        self.ids = ids = stream_queues + queue_pairs
        super().__init__({
            "queues_cmd": In(stream.Signature(command_layout(queue_pairs))),
            "queues_cpl": Out(stream.Signature(completion_layout(queue_pairs))),
            "stream_cmd": In(stream.Signature(command_layout(ids))),
            "stream_cpl": Out(stream.Signature(completion_layout(ids))),
            "cmd": Out(stream.Signature(command_layout(ids))),
            "cpl": In(stream.Signature(completion_layout(ids))),
            "hold": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        S = self.stream_queues
        m.submodules.merge = merge = StreamMerge(command_layout(self.ids), 2)
        queues, stream_ = merge.inputs
        m.d.comb += [queues.valid.eq(self.queues_cmd.valid), self.queues_cmd.ready.eq(queues.ready),
                     queues.payload.cmd.eq(self.queues_cmd.payload.cmd),
                     queues.payload.sqid.eq(self.queues_cmd.payload.sqid + S),
                     stream_.valid.eq(self.stream_cmd.valid & ~self.hold),
                     self.stream_cmd.ready.eq(stream_.ready & ~self.hold),
                     stream_.payload.eq(self.stream_cmd.payload)]
        wiring.connect(m, merge.output, wiring.flipped(self.cmd))

        cpl = self.cpl
        to_stream = cpl.payload.sqid < S
        back = self.queues_cpl.payload
        m.d.comb += [self.stream_cpl.payload.eq(cpl.payload),
                     back.sqid.eq(cpl.payload.sqid - S), back.cid.eq(cpl.payload.cid),
                     back.status.eq(cpl.payload.status), back.result.eq(cpl.payload.result),
                     self.stream_cpl.valid.eq(cpl.valid & to_stream),
                     self.queues_cpl.valid.eq(cpl.valid & ~to_stream),
                     cpl.ready.eq(Mux(to_stream, self.stream_cpl.ready, self.queues_cpl.ready))]
        return m
