// nand_model.sv -- one ONFI NAND target (SDR and NV-DDR2, x8) for Verilator.
//
// The pins are sampled on every rising edge of `clk` (the controller's clock;
// its period is the config key clk_period_ps).  Only when a pin changed, a
// deadline the C++ core asked for has come, or the control port was strobed
// does this module call into nand_model.cpp -- see the essay there.
//
// DQ is split (dq_i from the host, dq_o/dq_oe from the target) so Verilator
// needs no tristates; so is NV-DDR2's DQS (dqs_i and dqs_i_oe, high while the
// host drives it, from the host; dqs_o/dqs_oe from the target).  Harnesses
// without NV-DDR2 tie dqs_i and dqs_i_oe low.  NV-DDR2 needs a sampling clock
// fine enough for its edges: `clk` need not be the controller's.  On a channel with several targets the harness shares
// every input but ce_n and combines the outputs:
//     dq_to_host = |{dq_oe[k] ? dq_o[k] : 8'h00}   (one driver at a time;
//     R/B# is per target, or wired-AND: &rb_n).
//
// Instance INDEX reads +nand<INDEX>_config=<file> and optional
// +nand<INDEX>_set=<key>=<value>;... overrides; with neither it runs the
// small profile on nand<INDEX>.img in the working directory.
//
// Control port (for cocotb; the build uses --public-flat-rw): write ctl_op and
// ctl_arg0..2 (atomflash.nandsim.NandCtl), then toggle ctl_strobe; when
// ctl_ack equals ctl_strobe, ctl_result holds the answer.  power_lost goes
// high when power is cut and stays high until the model is reloaded.
//
// The same operations from inside the simulated system: the ext_ctl_* ports
// (the SoC's NandModelControl, soc/nand_sim.py; tie ext_ctl_strobe low where
// nothing drives them).  A change of ext_ctl_strobe runs ext_ctl_op once;
// ext_ctl_ack follows it with ext_ctl_result.  A host schedules cuts this way
// relative to the moment its workload starts.

`timescale 1ns / 1ps

module nand_model #(
    parameter int INDEX = 0
) (
    input  wire       clk,
    input  wire       ce_n,
    input  wire       cle,
    input  wire       ale,
    input  wire       we_n,
    input  wire       re_n,
    input  wire       wp_n,
    input  wire [7:0] dq_i,
    output reg  [7:0] dq_o,
    output reg        dq_oe,
    input  wire       dqs_i,
    input  wire       dqs_i_oe,
    output reg        dqs_o,
    output reg        dqs_oe,
    output reg        rb_n,
    input  wire        ext_ctl_strobe,
    input  wire [31:0] ext_ctl_op,
    input  wire [63:0] ext_ctl_arg0,
    input  wire [63:0] ext_ctl_arg1,
    input  wire [63:0] ext_ctl_arg2,
    output reg         ext_ctl_ack,
    output reg  [63:0] ext_ctl_result
);
    import "DPI-C" function chandle nand_model_open(input int index, input string config_path, input string overrides);
    import "DPI-C" function longint nand_model_eval(input chandle h, input longint cycle, input int pins, output int outs);
    import "DPI-C" function longint nand_model_control(input chandle h, input longint cycle, input int op,
                                                       input longint arg0, input longint arg1, input longint arg2);
    import "DPI-C" function void nand_model_close(input chandle h);

    // Control port.
    reg [31:0] ctl_op /*verilator public_flat_rw*/;
    reg [63:0] ctl_arg0 /*verilator public_flat_rw*/;
    reg [63:0] ctl_arg1 /*verilator public_flat_rw*/;
    reg [63:0] ctl_arg2 /*verilator public_flat_rw*/;
    reg        ctl_strobe /*verilator public_flat_rw*/;
    reg        ctl_ack /*verilator public_flat_rw*/;
    reg [63:0] ctl_result /*verilator public_flat_rw*/;
    reg        power_lost /*verilator public_flat_rw*/;
    reg [63:0] cycle /*verilator public_flat_rw*/;

    chandle    handle;
    longint    deadline;
    int        last_pins;
    int        outs;
    string     config_path;
    string     overrides;

    initial begin
        string key;
        config_path = "";
        overrides = "";
        key = $sformatf("nand%0d_config=%%s", INDEX);
        if (!$value$plusargs(key, config_path)) config_path = "";
        key = $sformatf("nand%0d_set=%%s", INDEX);
        if (!$value$plusargs(key, overrides)) overrides = "";
        handle = nand_model_open(INDEX, config_path, overrides);
        ctl_op = 0;
        ctl_arg0 = 0;
        ctl_arg1 = 0;
        ctl_arg2 = 0;
        ctl_strobe = 0;
        ctl_ack = 0;
        ctl_result = 0;
        ext_ctl_ack = 0;
        ext_ctl_result = 0;
        power_lost = 0;
        cycle = 0;
        deadline = 0;       // evaluate on the first edge
        last_pins = -1;
        dq_o = 8'h00;
        dq_oe = 1'b0;
        dqs_o = 1'b0;
        dqs_oe = 1'b0;
        rb_n = 1'b1;
    end

    final nand_model_close(handle);

    wire [31:0] pins = {16'h0, dq_i, dqs_i_oe, dqs_i, wp_n, re_n, we_n, ale, cle, ce_n};

    always @(posedge clk) begin
        if (ctl_strobe != ctl_ack) begin
            ctl_result <= nand_model_control(handle, cycle, ctl_op, ctl_arg0, ctl_arg1, ctl_arg2);
            ctl_ack <= ctl_strobe;
            deadline = cycle;  // outputs may have changed (reload, power cut)
        end
        if (ext_ctl_strobe != ext_ctl_ack) begin
            ext_ctl_result <= nand_model_control(handle, cycle, ext_ctl_op, ext_ctl_arg0, ext_ctl_arg1, ext_ctl_arg2);
            ext_ctl_ack <= ext_ctl_strobe;
            deadline = cycle;  // a cut scheduled sooner than the deadline asked for
        end
        if (pins != last_pins || cycle >= deadline) begin
            deadline = nand_model_eval(handle, cycle, pins, outs);
            last_pins = pins;
            dq_o <= outs[7:0];
            dq_oe <= outs[8];
            dqs_o <= outs[13];
            dqs_oe <= outs[14];
            rb_n <= outs[9];
            power_lost <= outs[10];
            if (outs[10] && !power_lost) $display("nand%0d: power lost at cycle %0d", INDEX, cycle);
            if (outs[11]) $fatal(1, "nand%0d: strict mode: timing/protocol violation (see above)", INDEX);
            if (outs[12]) begin
                $display("nand%0d: power cut: ending the simulation (power_cut_finish)", INDEX);
                $finish;
            end
        end
        cycle <= cycle + 1;
    end
endmodule
