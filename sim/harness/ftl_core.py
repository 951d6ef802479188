"""Verilator harness for the FTL core (``rtl/ftl/core.py``): the core, one
NAND model per target (:func:`sim.harness.nand_channel.generate_top`) and SoC
memory as a Verilog array ``mem`` behind the core's Wishbone initiator.

The memory answers one wait state after a request, byte lanes honoured, and
in incrementing bursts a word every cycle after the first, as LiteX's
``wishbone.SRAM`` on a bus with bursting does (``rtl.lib.wishbone``); a word
address at or past ``MEM_WORDS`` answers ``err`` (what the tests use to
provoke bus errors).  It powers on as FFh bytes, so an L2P table placed in it
starts out unmapped.  cocotb reads and writes ``mem`` directly (VPI), never
clocking Python per word.
"""

from __future__ import annotations

from pathlib import Path

from rtl.ftl.core import FtlCore
from . import runner
from .nand_channel import generate_top, harness_run_args

MEM_WORDS = 1 << 17        # 512 KiB of SoC memory

WB_IN = (("adr", 6), ("dat_w", 32), ("sel", 4), ("cyc", 1), ("stb", 1), ("we", 1))
WB_OUT = (("dat_r", 32), ("ack", 1), ("err", 1))


def firmware_ports(core: FtlCore):
    """The core's ports besides the NAND controller's, as ``generate_top``'s ``extra``: everything
    the firmware drives and reads, the host-queue registers and SoC memory."""
    free = core.free.payload.shape().size
    ports = [("in", w, f"regs__{n}") for n, w in WB_IN] + [("out", w, f"regs__{n}") for n, w in WB_OUT]
    ports += [("out", 30, "mem__adr"), ("out", 32, "mem__dat_w"), ("out", 4, "mem__sel"), ("out", 1, "mem__cyc"),
              ("out", 1, "mem__stb"), ("out", 1, "mem__we"), ("in", 32, "mem__dat_r"), ("in", 1, "mem__ack"),
              ("in", 1, "mem__err"), ("out", 3, "mem__cti"), ("out", 2, "mem__bte")]
    ports += [("out", 1, "irq"),
              ("in", 1, "free__valid"), ("out", 1, "free__ready"), ("in", free, "free__payload"),
              ("out", 1, "closed__valid"), ("in", 1, "closed__ready"), ("out", free, "closed__payload"),
              ("out", 1, "failed__valid"), ("in", 1, "failed__ready"), ("out", 32, "failed__payload"),
              ("out", 1, "failed_lost"),
              ("in", 1, "seq_load__valid"), ("out", 1, "seq_load__ready"), ("in", 64, "seq_load__payload"),
              ("in", core.pages_per_block.shape().width, "pages_per_block"), ("out", 1, "starved"),
              ("in", 64, "capacity"), ("in", 32, "l2p_base"), ("in", 32, "bt_base"), ("in", 5, "block_shift"),
              ("in", 32, "scratch_base"), ("in", 32, "identify_base"), ("in", 32, "log_base"),
              ("in", 1, "reloc__valid"), ("out", 1, "reloc__ready"), ("in", core.reloc.payload.shape().size, "reloc__payload"),
              ("out", 1, "reloc_done__valid"), ("in", 1, "reloc_done__ready"),
              ("out", core.reloc_done.payload.shape().size, "reloc_done__payload"), ("in", 32, "gc_buf"),
              ("in", 1, "map_fw__lock"), ("out", 1, "map_fw__grant"),
              ("in", 1, "map_fw__req__valid"), ("out", 1, "map_fw__req__ready"),
              ("in", core.map_fw.req.payload.shape().size, "map_fw__req__payload"),
              ("out", 1, "map_fw__resp__valid"), ("in", 1, "map_fw__resp__ready"),
              ("out", core.map_fw.resp.payload.shape().size, "map_fw__resp__payload"),
              ("out", 32, "map_hits"), ("out", 32, "map_misses"), ("in", 1, "hold"), ("in", 1, "no_space"), ("in", 1, "no_blocks"),
              # the lazy-load gate: off (a test that uses it drives these)
              ("in", 1, "map_lazy"), ("in", 5, "map_seg_shift"), ("in", 1, "map_seg_set__valid"),
              ("out", 1, "map_seg_set__ready"), ("in", core.map_seg_set.payload.shape().size, "map_seg_set__payload"),
              ("out", 1, "map_fault"), ("out", 32, "map_fault_seg"), ("out", 32, "map_faults"),
              ("out", 64, "tx_floor"), ("out", 64, "seq_next"), ("out", 32, "floor_passes"), ("out", core.tx_open.shape().width, "tx_open"),
              ("out", core.pending_free.shape().width, "pending_free"),
              ("in", core.pending_budget.shape().width, "pending_budget"),   # 0: the whole table
              ("in", 32, "cache_base"), ("out", 32, "cache_in"), ("out", 32, "cache_coalesced"),
              ("out", 32, "cache_destaged"), ("out", 32, "cache_stripes"),
              ("out", core.cache_dirty.shape().width, "cache_dirty"),
              *(("out", 32, n) for n in ("host_read_pages", "host_write_pages", "record_pages",
                                         "nand_reads", "nand_programs", "nand_erases", "pad_pages",
                                         "token_key")),
              ("in", 1, "mlc")]
    aw = core.buf_addr_width
    for c in range(core.channels):  # the firmware's page-buffer ports (idle unless a test drives them)
        ports += [("in", 1, f"fw_buf__{c}__request"), ("out", 1, f"fw_buf__{c}__grant"),
                  ("in", aw, f"fw_buf__{c}__port__addr"), ("in", 4, f"fw_buf__{c}__port__w_en"),
                  ("in", 32, f"fw_buf__{c}__port__w_data"), ("out", 32, f"fw_buf__{c}__port__r_data")]
    return tuple(ports)


def memory(words: int) -> str:
    """The harness's SoC memory ``mem``: ``words`` 32-bit words (a power of two), one wait state,
    a word a cycle in incrementing bursts, byte lanes, err past the end, FFh at power-on.

    Bursts work as in LiteX's ``wishbone.SRAM`` with bursting: the first access of a burst latches
    its address, and while ``cti`` says incrementing the memory answers every cycle at a counter
    running one word ahead of a read (level with a write), so it ignores ``adr`` until the burst
    ends (``cti`` END, or ``stb`` low: an ``ack`` then seen without ``stb`` is dropped, the next
    access starts afresh from its own ``adr``)."""
    assert words & (words - 1) == 0
    top = (words - 1).bit_length() - 1
    return f"""
    // SoC memory: one wait state, then a word a cycle in incrementing bursts; byte lanes, err past the end
    localparam MEM_WORDS = {words};
    reg [31:0] mem [0:MEM_WORDS-1];
    integer mem_i;
    initial for (mem_i = 0; mem_i < MEM_WORDS; mem_i = mem_i + 1) mem[mem_i] = 32'hFFFFFFFF;
    wire mem_burst = mem__cti == 3'b010;
    reg mem_latched;
    reg [29:0] mem_counter;
    initial mem_latched = 0;
    wire [29:0] mem_word = (mem_burst & mem_latched) ? mem_counter : mem__adr;
    wire mem_req = mem__cyc & mem__stb & (~mem__ack | mem_burst) & ~mem__err;
    wire mem_in_range = mem_word < MEM_WORDS;
    always @(posedge clk) begin
        mem__ack <= mem_req & mem_in_range;
        mem__err <= mem_req & ~mem_in_range;
        if (mem_req & mem_in_range)
            mem__dat_r <= mem[mem_word[{top}:0]];
        // a write lands in every strobed cycle, answered or not (a burst's last access is answered early)
        if (mem__cyc & mem__stb & ~mem__err & mem_in_range) begin
            if (mem__we) begin
                if (mem__sel[0]) mem[mem_word[{top}:0]][7:0] <= mem__dat_w[7:0];
                if (mem__sel[1]) mem[mem_word[{top}:0]][15:8] <= mem__dat_w[15:8];
                if (mem__sel[2]) mem[mem_word[{top}:0]][23:16] <= mem__dat_w[23:16];
                if (mem__sel[3]) mem[mem_word[{top}:0]][31:24] <= mem__dat_w[31:24];
            end
        end
        if (mem__cyc & mem__stb & mem_burst & ~mem__err) begin
            mem_latched <= 1;
            mem_counter <= mem_latched ? mem_counter + 1 : mem__adr + {{29'd0, ~mem__we}};
        end else begin
            mem_latched <= 0;
        end
    end
"""


MEMORY = memory(MEM_WORDS)


MAX_OPEN_TX, MAX_PENDING, MAX_APPENDS = 4, 64, 8      # small, so the tests reach the limits


def build(profile: str = "small", channels: int = 2, ways: int = 2, slots: int = 8, nand_slots: int = 5,
          cache_pages: int = 0, read_slots: int = 1, read_commands: int = 16, *, test_dir: Path) -> dict:
    """Generate the core's Verilog and the harness; runner.run keyword arguments
    plus the core's ``slot_words``.  ``nand_slots=5``: two program slots per
    channel besides the firmware's, the relocator's and the reader's.  The
    transaction limits are ``MAX_OPEN_TX``, ``MAX_PENDING`` and ``MAX_APPENDS``;
    ``cache_pages``: the write cache (a build of its own); ``read_slots``: the reader's slots
    per channel (taken from the programs'), ``read_commands`` its window of commands; ``test_dir``: the
    cocotb module's directory (the tests' ``tb/ftl_core``, the benchmark's ``sim/``)."""
    core = FtlCore(profile=profile, channels=channels, ways=ways, slots=slots, nand_slots=nand_slots,
                   max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING, max_appends=MAX_APPENDS,
                   cache_pages=cache_pages, read_slots=read_slots, read_commands=read_commands)
    name = (f"ftl_core_{profile}_c{channels}w{ways}s{slots}" +
            f"n{nand_slots}t{MAX_OPEN_TX}p{MAX_PENDING}a{MAX_APPENDS}" + (f"wc{cache_pages}" if cache_pages else "") +
            (f"r{read_slots}" if read_slots != 1 else "") + (f"k{read_commands}" if read_commands != 16 else ""))
    verilog = runner.amaranth_verilog(core, name, key=dict(
        profile=profile, channels=channels, ways=ways, slots=slots, nand_slots=nand_slots, max_open_tx=MAX_OPEN_TX,
        max_pending=MAX_PENDING, max_appends=MAX_APPENDS, cache_pages=cache_pages, read_slots=read_slots,
        read_commands=read_commands))
    text = generate_top(channels, ways, module=name, buffers=False, extra=firmware_ports(core))
    text = text.replace("\nendmodule\n", "\n" + MEMORY + "endmodule\n")
    sv = runner.write_if_changed(runner.BUILD / "rtl" / f"tb_{name}.sv", text)
    return dict(harness_run_args(name, verilog, sv, test_dir), slot_words=core.slot_words)
