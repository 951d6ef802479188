// bench_top.sv -- throughput harness: an ONFI host FSM in SystemVerilog drives
// one nand_model through a program / status / read loop over whole pages,
// erasing each block before reuse, with no Python anywhere.
//
// Timing is ONFI mode 0 at a 100 MHz clock (10 ns): every WE#/RE# phase is a
// whole number of cycles that meets the mode-0 table; the model checks it, and
// bench.py fails the run if the model reports any violation.  The loop ends
// ($finish) after +pages=<n> page program+read pairs; +page_bytes=<n> and
// +pages_per_block=<n> must match the model's config.

`timescale 1ns / 1ps

module bench_top (
    input wire clk
);
    localparam int WL = 5, WH = 5;        // WE# low/high: tWP/tCLS/tALS/tDS 50, tWC 100
    localparam int RL = 6, RH = 5;        // RE# low/high: tRP 50, tREA 40 + the model's sampling clock, tRC 100
    localparam int T_CS = 8, T_ADL = 32, T_WHR = 8, T_WB = 16, T_RR = 6, T_RHW = 20;

    reg        ce_n = 1'b1, cle = 1'b0, ale = 1'b0, we_n = 1'b1, re_n = 1'b1;
    reg  [7:0] dq_i = 8'h00;
    wire [7:0] dq_o;
    wire       dq_oe, rb_n;

    nand_model #(.INDEX(0)) target (
        .clk(clk), .ce_n(ce_n), .cle(cle), .ale(ale), .we_n(we_n), .re_n(re_n), .wp_n(1'b1),
        .dq_i(dq_i), .dq_o(dq_o), .dq_oe(dq_oe), .dqs_i(1'b0), .dqs_i_oe(1'b0), .dqs_o(), .dqs_oe(), .rb_n(rb_n),
        .ext_ctl_strobe(1'b0), .ext_ctl_op(32'd0), .ext_ctl_arg0(64'd0), .ext_ctl_arg1(64'd0), .ext_ctl_arg2(64'd0), .ext_ctl_ack(), .ext_ctl_result());

    int page_bytes = 2176, pages_per_block = 64, pages_total = 64;
    initial begin
        if (!$value$plusargs("page_bytes=%d", page_bytes)) page_bytes = 2176;
        if (!$value$plusargs("pages_per_block=%d", pages_per_block)) pages_per_block = 64;
        if (!$value$plusargs("pages=%d", pages_total)) pages_total = 64;
    end

    // Bus engine: one WE# or RE# cycle, or a wait, at a time.
    typedef enum logic [2:0] {B_IDLE, B_WLOW, B_WHIGH, B_RLOW, B_RHIGH, B_WAIT, B_WAIT_RB} bus_t;
    bus_t      bus = B_IDLE;
    int        cnt = 0;
    reg  [7:0] rdata;

    // Sequencer.
    int        pc = 0, idx = 0, page = 0, block = 1, done = 0, errors = 0;
    longint    cycles = 0;
    wire [23:0] row = 24'(block * pages_per_block + page);
    wire [7:0] expect_byte = 8'(idx * 7 + page * 13 + block);

    task automatic wr(input logic c, input logic a, input logic [7:0] v);
        cle <= c; ale <= a; dq_i <= v; we_n <= 1'b0; cnt <= WL; bus <= B_WLOW;
    endtask
    task automatic rd();
        re_n <= 1'b0; cnt <= RL; bus <= B_RLOW;
    endtask
    task automatic wait_cycles(input int n);
        cnt <= n; bus <= B_WAIT;
    endtask
    function automatic logic [7:0] addr_byte(input int i);
        case (i)
            0, 1: return 8'h00;
            2: return row[7:0];
            3: return row[15:8];
            default: return row[23:16];
        endcase
    endfunction

    always @(posedge clk) begin
        cycles <= cycles + 1;
        case (bus)
            B_WLOW:  if (cnt <= 1) begin we_n <= 1'b1; cnt <= WH; bus <= B_WHIGH; end else cnt <= cnt - 1;
            B_WHIGH: if (cnt <= 1) begin cle <= 1'b0; ale <= 1'b0; bus <= B_IDLE; end else cnt <= cnt - 1;
            B_RLOW:  if (cnt <= 1) begin rdata <= dq_o; re_n <= 1'b1; cnt <= RH; bus <= B_RHIGH; end else cnt <= cnt - 1;
            B_RHIGH: if (cnt <= 1) bus <= B_IDLE; else cnt <= cnt - 1;
            B_WAIT:  if (cnt <= 1) bus <= B_IDLE; else cnt <= cnt - 1;
            B_WAIT_RB: if (rb_n) bus <= B_IDLE;
            default: ;
        endcase
        if (bus == B_IDLE) begin
            pc <= pc + 1;  // default: next step
            case (pc)
                0: begin ce_n <= 1'b0; wait_cycles(T_CS); end
                // PAGE PROGRAM
                1: wr(1, 0, 8'h80);
                2, 3, 4, 5, 6: wr(0, 1, addr_byte(pc - 2));
                7: begin wait_cycles(T_ADL); idx <= 0; end
                8: begin wr(0, 0, expect_byte); idx <= idx + 1; if (idx + 1 < page_bytes) pc <= 8; end
                9: wr(1, 0, 8'h10);
                10: wait_cycles(T_WB);
                11: bus <= B_WAIT_RB;
                12: wait_cycles(T_RR);
                13: wr(1, 0, 8'h70);
                14: wait_cycles(T_WHR);
                15: rd();
                16: begin if (rdata[0] || !rdata[6]) errors <= errors + 1; wait_cycles(T_RHW); end
                // READ
                17: wr(1, 0, 8'h00);
                18, 19, 20, 21, 22: wr(0, 1, addr_byte(pc - 18));
                23: wr(1, 0, 8'h30);
                24: wait_cycles(T_WB);
                25: bus <= B_WAIT_RB;
                26: begin wait_cycles(T_RR); idx <= 0; end
                27: rd();
                28: begin
                    if (rdata != expect_byte) errors <= errors + 1;
                    idx <= idx + 1;
                    if (idx + 1 < page_bytes) begin pc <= 28; rd(); end
                    else wait_cycles(T_RHW);
                end
                29: begin
                    done <= done + 1;
                    if (done + 1 >= pages_total) begin
                        $display("BENCH pages=%0d page_bytes=%0d errors=%0d cycles=%0d", done + 1, page_bytes, errors, cycles);
                        $finish;
                    end
                    if (page + 1 < pages_per_block) begin page <= page + 1; pc <= 1; end
                    else begin page <= 0; block <= block + 1; end
                end
                // BLOCK ERASE of the next block, then back to programming
                30: wr(1, 0, 8'h60);
                31, 32, 33: wr(0, 1, addr_byte(pc - 29));
                34: wr(1, 0, 8'hD0);
                35: wait_cycles(T_WB);
                36: bus <= B_WAIT_RB;
                37: begin wait_cycles(T_RR); pc <= 1; end
                default: pc <= 1;
            endcase
        end
    end
endmodule
