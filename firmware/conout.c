/* See conout.h: console output on a UART that may have no reader. */
#include "conout.h"

int af_conout_admit(af_conout_t *s, int (*full)(void), uint64_t (*now)(void), uint64_t limit)
{
	if (!full()) {
		s->dropping = 0;
		return 1;
	}
	if (s->dropping) {
		s->dropped++;
		return 0;
	}
	uint64_t t0 = now();
	while (full()) {
		if (now() - t0 >= limit) {
			s->dropping = 1;
			s->dropped++;
			return 0;
		}
	}
	return 1;
}
