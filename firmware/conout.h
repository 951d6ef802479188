/* Console output that never waits for a reader who is not there.
 *
 * On a board with the whole controller (boards/ --core ftl) the console is a
 * LiteX crossover UART: its characters leave only when a host reads them
 * through the UART bridge (`litex_term crossover`).  libbase's uart_write()
 * spins while the transmit FIFO is full, so with nobody reading, the boot
 * would stop at its first long printf and never enable the host interface.
 * af_conout_admit() decides per character: write it (there is room), wait for
 * room up to `limit` cycles (a reader is slow), or drop it (nobody read for
 * `limit` cycles: stop waiting until the FIFO has room again).  Pure logic,
 * so tb/firmware_conout runs it on the host with fakes. */
#ifndef AF_CONOUT_H
#define AF_CONOUT_H

#include <stdint.h>

typedef struct {
	int dropping;      /* the last wait timed out: drop until there is room */
	uint32_t dropped;  /* characters dropped */
} af_conout_t;

/* 1: write the character now; 0: drop it. */
int af_conout_admit(af_conout_t *s, int (*full)(void), uint64_t (*now)(void), uint64_t limit);

#endif
