"""The NVMe host driver (:mod:`atomflash.nvme`) on the reference controller
(:mod:`atomflash.model.nvme`): bring-up, every verb against a plain :class:`Model` fed the same
operations (statuses as exceptions included), PRPs and PRP lists, shutdown, and the NVMe statuses
atomflash has no name for."""

import random

import pytest

from atomflash import errors, spec
from atomflash.hostmem import PAGE, HostMemory
from atomflash.model import Limits, Model
from atomflash.model.nvme import NvmeController
from atomflash.nvme import NvmeError, NvmeHost, cdw10_11
from atomflash.spec import NvmeAdminOpcode, NvmeCommandStatus, NvmeSct, Status

LIMITS = Limits(capacity=512, lba_size=512, max_transfer=16, max_atomic_pages=8, max_open_tx=4,
                max_pending=64, max_remap_triples=4, max_appends=4)


def bring_up(io_queues=4, **kw):
    memory = HostMemory()
    ctrl = NvmeController(memory, limits=LIMITS, **kw)
    host = NvmeHost(ctrl, memory, io_queues=io_queues, queue_entries=8).initialize()
    return ctrl, host


def test_bring_up_follows_the_standard_and_identifies_the_drive():
    ctrl, host = bring_up()
    assert host.io_queues == [1, 2, 3, 4]
    assert host.reg("csts").rdy == 1
    assert host.controller["nn"] == 1 and host.controller["sqes"] == 0x66 and host.controller["cqes"] == 0x44
    assert host.controller["vid"] == spec.NVME.VENDOR_ID and host.controller["ver"] == spec.NVME.VERSION
    assert host.controller["af_max_atomic_pages"] == LIMITS.max_atomic_pages
    assert host.namespace["nsze"] == host.namespace["ncap"] == LIMITS.capacity
    assert host.block == LIMITS.lba_size
    # again, from an enabled controller: it is disabled first
    host.initialize()
    assert host.io_queues == [1, 2, 3, 4]


def run_both(host, model, op, *args, **kw):
    """The same verb on the driver and on a plain model: the same status, the same data (what a queue
    opens -- a transaction, an append -- is that queue's, on both)."""
    owned = op.startswith("tx_") or op in ("append", "remap", "release")
    want = getattr(model, op)(*args, **({"queue": kw["qid"]} if owned and "qid" in kw else {}))
    try:
        got = getattr(host, op)(*args, **kw)
    except errors.AtomflashError as e:
        assert e.status == want.status, (op, args)
        return None
    assert want.status == Status.SUCCESS, (op, args, want.status)
    if op in ("read", "tx_read"):
        assert got == want.data, (op, args)
    if op == "append":
        assert got == want.result
    return got


def test_every_verb_matches_the_model_on_every_queue():
    rng = random.Random(5)
    ctrl, host = bring_up()
    model = Model(LIMITS)
    blk = LIMITS.lba_size
    tokens, tids = [], []
    seen = set()
    for i in range(400):
        qid = rng.choice(host.io_queues)
        op = rng.choice(["write", "read", "trim", "atomic", "tx", "append", "remap", "release", "flush", "bad"])
        lba = rng.randrange(LIMITS.capacity + 4)
        nlb = rng.randrange(1, 5)
        data = rng.randbytes(nlb * blk)
        if op == "write":
            run_both(host, model, "write", lba, data, qid=qid)
        elif op == "read":
            run_both(host, model, "read", lba, nlb, qid=qid, offset=rng.choice([0, 4, 512, PAGE - 8]))
        elif op == "trim":
            want = model.trim(lba, nlb)
            try:
                host.trim([(lba, nlb)], qid=qid)
                assert want.ok
            except errors.AtomflashError as e:
                assert e.status == want.status
        elif op == "atomic":
            entries = [(rng.randrange(LIMITS.capacity), rng.randbytes(blk)) for _ in range(rng.randrange(1, 10))]
            run_both(host, model, "atomic_write", entries, qid=qid)
        elif op == "tx":
            tid = rng.choice(tids + [rng.randrange(1, 50)])
            step = rng.choice(["write", "read", "commit", "abort"])
            if step == "write":
                run_both(host, model, "tx_write", tid, lba, data, qid=qid)
                tids.append(tid)
            elif step == "read":
                run_both(host, model, "tx_read", tid, lba, nlb, qid=qid)
            else:
                run_both(host, model, f"tx_{step}", tid, qid=qid)
        elif op == "append":
            token = run_both(host, model, "append", data, qid=qid)
            if token is not None:
                tokens.append((token, nlb))
        elif op == "remap" and tokens:
            token, n = tokens.pop(rng.randrange(len(tokens)))
            run_both(host, model, "remap", [(lba, token, n)], qid=qid)
        elif op == "release" and tokens:
            token, _ = tokens.pop(rng.randrange(len(tokens)))
            run_both(host, model, "release", token ^ rng.choice([0, 0, 1 << 40]), qid=qid)
        elif op == "flush":
            run_both(host, model, "flush", qid=qid)
        elif op == "bad":     # a transfer beyond the limit: INVALID_FIELD, which the model calls TRANSFER_TOO_LARGE
            with pytest.raises(errors.InvalidField):
                host.read(0, LIMITS.max_transfer + 1, qid=qid)
            seen.add("bad")
        seen.add(op)
    for lba in range(LIMITS.capacity):
        assert host.read(lba) == model.read(lba, 1).data
    assert {"write", "read", "atomic", "tx", "append", "remap", "release", "bad"} <= seen


def walk_prps(memory, prp1, prp2, nbytes):
    """The pages a controller would follow from PRP1/PRP2 (written from NVMe 2.0's PRP rules)."""
    pages = [prp1]
    left = nbytes - (PAGE - prp1 % PAGE)
    if left <= 0:
        return pages
    if left <= PAGE:
        return pages + [prp2]
    entry = prp2
    while left > 0:
        if entry % PAGE == PAGE - 8 and left > PAGE:     # the last entry of a list page chains
            entry = int.from_bytes(memory.read(entry, 8), "little")
            continue
        pages.append(int.from_bytes(memory.read(entry, 8), "little"))
        entry += 8
        left -= PAGE
    return pages


@pytest.mark.parametrize("nbytes, offset", [(512, 0), (4096, 0), (4096, 8), (8192, 0), (12288, 100),
                                            (512 * PAGE, 0), (513 * PAGE, 0), (3 << 20, 64)])
def test_prps_describe_every_page_of_the_buffer(nbytes, offset):
    memory = HostMemory()
    host = NvmeHost(None, memory)
    addr, allocations = host._buffer(nbytes, offset)
    prp1, prp2 = host.prps(addr, nbytes, allocations)
    pages = walk_prps(memory, prp1, prp2, nbytes)
    assert pages == [addr] + list(range(addr - offset + PAGE, addr + nbytes, PAGE))


def test_a_read_through_a_prp_list_lands_in_the_right_pages():
    ctrl, host = bring_up(io_queues=1)
    blk = LIMITS.lba_size
    data = bytes(random.Random(1).randbytes(LIMITS.max_transfer * blk))
    host.write(0, data, offset=8)
    assert host.read(0, LIMITS.max_transfer, offset=PAGE - 4) == data


def test_shutdown_reports_complete_and_a_statuses_without_a_name_raise_nvme_error():
    ctrl, host = bring_up(io_queues=2)
    with pytest.raises(NvmeError) as e:      # a queue id beyond what the controller has
        host.admin(NvmeAdminOpcode.CREATE_IO_CQ, prp1=host.memory.alloc(PAGE),
                   slba=cdw10_11(7 << 16 | spec.NVME.IO_QUEUES + 1, 1))
    assert (e.value.sct, e.value.sc) == (NvmeSct.COMMAND_SPECIFIC, NvmeCommandStatus.INVALID_QID)
    host.write(3, bytes(range(256)) * 2)
    host.shutdown()
    assert host.reg("csts").shst == 2
    ctrl.power_cycle()
    host.initialize()
    assert host.read(3) == bytes(range(256)) * 2
    assert host.smart()["unsafe_shutdowns"] == 0
