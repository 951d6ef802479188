// tb_nand_model.sv -- cocotb harness: one channel with two NAND targets.
//
// The clock runs in SystemVerilog (built with --timing) so Python is only
// woken when the ONFI driver in tests/onfi_host.py moves a pin or waits for
// R/B#; the period comes from +clk_period_ps (default 10000 = 100 MHz) and
// must equal the models' clk_period_ps.  Targets share every pin but CE# and
// R/B#; DQ (and DQS) from the targets is OR-ed, each gated by its dq_oe (dqs_oe).

`timescale 1ns / 1ps

module tb_nand_model;
    reg        clk = 1'b0;
    reg  [1:0] ce_n = 2'b11;
    reg        cle = 1'b0;
    reg        ale = 1'b0;
    reg        we_n = 1'b1;
    reg        re_n = 1'b1;
    reg        wp_n = 1'b1;
    reg  [7:0] dq_i = 8'h00;
    reg        dqs_i = 1'b0;
    reg        dqs_i_oe = 1'b0;
    wire [7:0] dq;
    wire       dqs;
    wire       dqs_o0, dqs_o1, dqs_oe0, dqs_oe1;
    wire [1:0] rb_n;
    wire [7:0] dq_o0, dq_o1;
    wire       dq_oe0, dq_oe1;
    wire       dq_oe = dq_oe0 | dq_oe1;
    wire       bus_conflict = dq_oe0 & dq_oe1;
    longint    half_ps = 5000;

    assign dq = (dq_oe0 ? dq_o0 : 8'h00) | (dq_oe1 ? dq_o1 : 8'h00);
    assign dqs = (dqs_oe0 & dqs_o0) | (dqs_oe1 & dqs_o1);

    initial begin
        longint period_ps;
        if ($value$plusargs("clk_period_ps=%d", period_ps)) half_ps = period_ps / 2;
        forever begin
            #(half_ps * 1ps) clk = ~clk;
        end
    end

    always @(posedge clk) if (bus_conflict) $error("both targets drive DQ");

    nand_model #(.INDEX(0)) target0 (
        .clk(clk), .ce_n(ce_n[0]), .cle(cle), .ale(ale), .we_n(we_n), .re_n(re_n), .wp_n(wp_n),
        .dq_i(dq_i), .dq_o(dq_o0), .dq_oe(dq_oe0), .rb_n(rb_n[0]),
        .dqs_i(dqs_i), .dqs_i_oe(dqs_i_oe), .dqs_o(dqs_o0), .dqs_oe(dqs_oe0),
        .ext_ctl_strobe(1'b0), .ext_ctl_op(32'd0), .ext_ctl_arg0(64'd0), .ext_ctl_arg1(64'd0), .ext_ctl_arg2(64'd0), .ext_ctl_ack(), .ext_ctl_result());
    nand_model #(.INDEX(1)) target1 (
        .clk(clk), .ce_n(ce_n[1]), .cle(cle), .ale(ale), .we_n(we_n), .re_n(re_n), .wp_n(wp_n),
        .dq_i(dq_i), .dq_o(dq_o1), .dq_oe(dq_oe1), .rb_n(rb_n[1]),
        .dqs_i(dqs_i), .dqs_i_oe(dqs_i_oe), .dqs_o(dqs_o1), .dqs_oe(dqs_oe1),
        .ext_ctl_strobe(1'b0), .ext_ctl_op(32'd0), .ext_ctl_arg0(64'd0), .ext_ctl_arg1(64'd0), .ext_ctl_arg2(64'd0), .ext_ctl_ack(), .ext_ctl_result());
endmodule
