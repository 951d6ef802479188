// bench_main.cpp -- Verilator main for bench_top: toggles the clock until
// $finish and reports simulated cycles per wall-clock second.
#include <chrono>
#include <cstdio>
#include <memory>

#include "Vbench_top.h"
#include "verilated.h"

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    auto top = std::make_unique<Vbench_top>();
    top->clk = 0;
    top->eval();
    uint64_t cycles = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (!Verilated::gotFinish()) {
        top->clk = 1;
        top->eval();
        top->clk = 0;
        top->eval();
        cycles++;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    top->final();
    std::printf("BENCH_RESULT cycles=%llu seconds=%.6f cycles_per_second=%.0f\n", (unsigned long long)cycles, s,
                cycles / s);
    return 0;
}
