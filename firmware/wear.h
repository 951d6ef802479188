/* atomflash firmware: wear levelling (see wear.c). */
#ifndef AF_WEAR_H
#define AF_WEAR_H

#include <stdint.h>

#define AF_WEAR_DEFAULT_SPREAD 8u /* static levelling moves data out of a block this far below the most worn */

typedef struct {
	int static_off;          /* console `wear static off` */
	uint32_t spread;         /* threshold of the static part (erases below the most worn block) */
	uint32_t moves;          /* cold blocks relocated by the static part */
	uint32_t copies;         /* pages the static part relocated */
	uint32_t failed;
} af_wear_t;

extern af_wear_t af_wear;

/* Static levelling: the coldest data block when the spread passes the threshold (gc.c moves it), or
 * AF_WEAR_NONE; it looks only after an erase since the last call. */
#define AF_WEAR_NONE UINT32_MAX
uint32_t af_wear_cold_block(void);

/* Life used, percent (may pass 100): the mean erase count of the FTL's good blocks (retired ones
 * included) over the rated endurance of the parameter page, rounded down; 0 when the part rates none. */
uint32_t af_wear_percentage_used(void);

#endif
