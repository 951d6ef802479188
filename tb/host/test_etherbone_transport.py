"""`atomflash.transport.EtherboneTransport` against a fake Etherbone drive on
UDP (LiteEth's behaviour: a record's writes, then its reads, answered to the
asker with the reads' return address as the answer's base address): bursts
longer than a record, a lost request or answer sent again, a late answer to
an earlier try ignored, and a drive that never answers."""

from __future__ import annotations

import queue
import socket
import threading
import time

import pytest
from litex.tools.remote.etherbone import EtherbonePacket, EtherboneRecord, EtherboneWrites

from atomflash.transport import EtherboneTransport, TransportError


class FakeEtherboneDrive:
    """Word memory behind Etherbone on a UDP socket.  ``drop``: how many of the
    next datagrams to lose; ``duplicate``: answer every request twice."""

    def __init__(self):
        self.mem: dict[int, int] = {}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.drop = 0
        self.duplicate = False
        self.silent = False
        self.requests = 0
        self.max_record_words = 0
        self.answer_delay = 0.0           # seconds before each answer leaves (a slow bus, a long wire)
        self.answer_after = 0             # no answer leaves before this many requests came (a window in flight)
        self.log: list[tuple[str, int]] = []   # ("rx", first address) and ("tx", first address), in order
        self._answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()
        threading.Thread(target=self._send_answers, daemon=True).start()

    def _serve(self):
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except OSError:
                return
            self.requests += 1
            if self.silent:
                continue
            if self.drop:
                self.drop -= 1
                continue
            packet = EtherbonePacket(32, data)
            packet.decode()
            first = None
            if packet.records and (packet.records[0].wcount or packet.records[0].rcount):
                rec = packet.records[0]
                first = rec.writes.base_addr if rec.wcount else rec.reads.reads[0].addr
                self.log.append(("rx", first))
            answer = EtherbonePacket(32)
            if packet.pf:
                answer.pr = 1
            for rec in packet.records:
                words = (1 + rec.wcount if rec.wcount else 0) + (1 + rec.rcount if rec.rcount else 0)
                self.max_record_words = max(self.max_record_words, words)
                if rec.wcount:
                    for i, w in enumerate(rec.writes.get_datas()):
                        self.mem[rec.writes.base_addr + 4 * i] = w
                if rec.rcount:
                    out = EtherboneRecord(4)
                    # (litex's EtherboneReads.decode drops base_ret_addr: take it from the bytes)
                    ret = int.from_bytes(bytes(rec.reads.bytes[:4]), "big")
                    out.writes = EtherboneWrites(base_addr=ret, addr_size=4,
                                                 datas=[self.mem.get(r.addr, 0) for r in rec.reads.reads])
                    answer.records.append(out)
            if answer.pr or answer.records:
                answer.encode()
                self._answers.put((time.monotonic() + self.answer_delay, bytes(answer.bytes), peer, first))

    def _send_answers(self):
        """Answers leave in the order of their requests, each ``answer_delay`` after it arrived and not
        before ``answer_after`` requests came."""
        while True:
            due, data, peer, first = self._answers.get()
            while sum(e == "rx" for e, _ in self.log) < self.answer_after:
                time.sleep(0.001)
            time.sleep(max(0.0, due - time.monotonic()))
            if first is not None:
                self.log.append(("tx", first))
            for _ in range(2 if self.duplicate else 1):
                try:
                    self.sock.sendto(data, peer)
                except OSError:
                    return

    def close(self):
        self.sock.close()


@pytest.fixture
def drive():
    d = FakeEtherboneDrive()
    yield d
    d.close()


def link(drive, **kw):
    t = EtherboneTransport("127.0.0.1", drive.port, bind_port=0, **kw)
    t.pipeline(0, 0x10000)           # "host memory"; a register lies above it
    return t


def test_read_write_and_long_bursts(drive):
    with link(drive) as t:
        words = list(range(1000, 1700))          # several records each way
        t.write(0x1000, words)
        assert t.read(0x1000, len(words)) == words
        assert t.read(0x1000 + 4 * 100, 3) == words[100:103]
        # a record never needs more than the drive's 256-word buffer
        assert drive.max_record_words <= 256
        assert t.words_written == 700 and t.words_read == 703 and t.resends == 0


def test_lost_datagrams_are_sent_again(drive):
    with link(drive, timeout=0.2, retries=3) as t:
        drive.drop = 2
        t.write(0x40, [7, 8, 9])
        t.sync()
        assert t.resends == 2 and t.read(0x40, 3) == [7, 8, 9]


def test_a_loss_inside_the_window_resends_the_rest_in_order(drive):
    """Writes are posted, several in flight; one lost in the middle is sent again with every
    request after it (go-back-N), so a later write to the same words still lands last."""
    with link(drive, timeout=0.2, retries=3, window=4) as t:
        t.write(0x2000, list(range(600)))          # three records in flight
        drive.drop = 1                             # the next request is lost ...
        t.write(0x2000, [1] * 10)
        t.write(0x2000, [2] * 5)                   # ... and this one overtakes it
        assert t.read(0x2000, 12) == [2] * 5 + [1] * 5 + [10, 11]
        assert t.resends >= 2 and drive.mem[0x2000] == 2


def test_a_duplicate_answer_is_not_taken_for_the_next_one(drive):
    with link(drive) as t:
        drive.duplicate = True
        t.write(0x80, [1, 2])
        t.write(0x80, [3, 4])
        assert t.read(0x80, 2) == [3, 4]         # not the stale [2] answer of the write before
        assert t.read(0x84, 1) == [4]


def test_a_register_access_waits_for_every_request_before_it(drive):
    """A doorbell must not reach the drive before the command's data: a lost data record
    would let the drive run the command on stale data before the resend."""
    with link(drive, timeout=1.0, retries=3, window=4) as t:
        drive.answer_after = 3                     # the data's three records are all in flight first ...
        drive.answer_delay = 0.05                  # ... and answered slowly
        t.write(0x3000, list(range(700)))          # data: three records, pipelined
        t.write(0x20000, [5])                      # a register: sent only once the data is answered
        t.sync()
        assert [e for e, _ in drive.log] == ["rx", "rx", "rx", "tx", "tx", "tx", "rx", "tx"], drive.log


def test_a_silent_drive_is_an_error_not_zeros(drive):
    with link(drive, timeout=0.1, retries=2) as t:
        drive.silent = True
        with pytest.raises(TransportError, match="no answer from the drive .* to a read of 4 words at 0x00000100 "
                                                 r"\(3 tries"):
            t.read(0x100, 4)


def test_nobody_there():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError, match="nothing listens on udp://127.0.0.1"):
        EtherboneTransport("127.0.0.1", port, bind_port=0, timeout=0.2, retries=1)
