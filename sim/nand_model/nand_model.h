/* nand_model.h -- DPI-C interface of the atomflash NAND behavioural model.
 *
 * nand_model.sv imports these; a C++ harness without SystemVerilog (the
 * benchmark) may call them directly.  See nand_model.cpp for the design.
 */
#ifndef NAND_MODEL_H
#define NAND_MODEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* nand_model_eval pin word: what the model samples each clk edge. */
#define NAND_PIN_CE_N (1u << 0)
#define NAND_PIN_CLE (1u << 1)
#define NAND_PIN_ALE (1u << 2)
#define NAND_PIN_WE_N (1u << 3)
#define NAND_PIN_RE_N (1u << 4)
#define NAND_PIN_WP_N (1u << 5)
#define NAND_PIN_DQS (1u << 6)      /* DQS as the host drives it (NV-DDR2 data input) */
#define NAND_PIN_DQS_DRV (1u << 7)  /* the host drives DQS */
#define NAND_PIN_DQ_SHIFT 8

/* nand_model_eval output word. */
#define NAND_OUT_DQ_MASK 0xffu
#define NAND_OUT_DQ_OE (1u << 8)
#define NAND_OUT_RB_N (1u << 9)
#define NAND_OUT_POWER_LOST (1u << 10)
#define NAND_OUT_FATAL (1u << 11)  /* strict mode: a violation happened, stop */
#define NAND_OUT_FINISH (1u << 12) /* power_cut_finish: end the simulation */
#define NAND_OUT_DQS (1u << 13)    /* DQS as the part drives it (NV-DDR2 data output) */
#define NAND_OUT_DQS_OE (1u << 14)

#define NAND_NO_DEADLINE INT64_MAX

/* Open instance `index` with the config file `config_path` ("" = defaults,
 * image nand<index>.img) and `overrides` ("key=value;key=value", may be ""). */
void *nand_model_open(int index, const char *config_path, const char *overrides);

/* Advance to clk cycle `cycle` with the sampled `pins`; returns the outputs in
 * *outs and the next cycle at which the model must be evaluated even if no pin
 * changes (NAND_NO_DEADLINE: none).  Call at least on every pin change. */
int64_t nand_model_eval(void *handle, int64_t cycle, int pins, int *outs);

/* Control port: NandCtl `op` with three arguments; returns the result. */
int64_t nand_model_control(void *handle, int64_t cycle, int op, int64_t arg0, int64_t arg1, int64_t arg2);

/* Write statistics, flush the image and free the instance. */
void nand_model_close(void *handle);

#ifdef __cplusplus
}
#endif

#endif /* NAND_MODEL_H */
