"""`atomflash.transport.EtherboneTransport` against a fake Etherbone drive on
UDP (LiteEth's behaviour: a record's writes, then its reads, answered to the
asker with the reads' return address as the answer's base address): bursts
longer than a record, a lost request or answer sent again, a late answer to
an earlier try ignored, and a drive that never answers."""

from __future__ import annotations

import socket
import threading

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
        threading.Thread(target=self._serve, daemon=True).start()

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
                for _ in range(2 if self.duplicate else 1):
                    self.sock.sendto(bytes(answer.bytes), peer)

    def close(self):
        self.sock.close()


@pytest.fixture
def drive():
    d = FakeEtherboneDrive()
    yield d
    d.close()


def link(drive, **kw):
    return EtherboneTransport("127.0.0.1", drive.port, bind_port=0, **kw)


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
        assert t.resends == 2 and t.read(0x40, 3) == [7, 8, 9]


def test_a_duplicate_answer_is_not_taken_for_the_next_one(drive):
    with link(drive) as t:
        drive.duplicate = True
        t.write(0x80, [1, 2])
        t.write(0x80, [3, 4])
        assert t.read(0x80, 2) == [3, 4]         # not the stale [2] answer of the write before
        assert t.read(0x84, 1) == [4]


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
