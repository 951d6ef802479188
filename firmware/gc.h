/* atomflash firmware: garbage collection (see gc.c). */
#ifndef AF_GC_H
#define AF_GC_H

#include <stdint.h>

typedef struct {
	unsigned policy;         /* spec.GcPolicy (AF_GCPOLICY_*) */
	int off;                 /* automatic GC off (console `gc off`) */
	uint32_t low, high;      /* free-block thresholds (0: dies, 2 x dies) */
	uint32_t victims, foreground, copies, raced, failed, holds, oob_reads;
	uint32_t retired;        /* grown bad blocks whose data GC moved out */
	uint32_t escalated;      /* background steps that went on with the host held: the host's writes took the drive below low */
	uint32_t drained;        /* times GC waited for the host's commands to leave the core, to spend the block kept for them */
	uint32_t no_room;        /* victims left mid-way: their copies would have taken the block kept for the core */
	uint32_t map_passes;     /* passes over the L2P table for pages bound under an LBA their OOB does not name */
	uint32_t by_map;         /* copies of such pages (remapped appends) */
	uint32_t requests;       /* relocations asked for: the next one's tag */
	uint32_t late;           /* answers to relocations GC had stopped waiting for, discarded */
	uint64_t cycles;         /* spent collecting */
	uint64_t last_seq;       /* the log's seq at the last poll (quiet host: unchanged) */
	uint64_t idle_seq;       /* 1 + the seq when a step last found nothing to do (0: none) */
	uint32_t idle_free;      /* ... and the free blocks then */
	uint32_t idle_floor;     /* ... and ftl.tx_floor_lo then */
} af_gc_t;

extern af_gc_t af_gc;

/* What a step that moved a victim's data out but could not free it returns: its erase failed and the
 * block is retired.  GC goes on to the next victim; it is not "nothing to collect". */
#define AF_GC_RETIRED 1

/* Collect one victim (taking a checkpoint first when none covers a candidate).
 * 0, AF_GC_RETIRED, or -1 when nothing was collected. */
int af_gc_step(int foreground);
/* Relocate every bound page of global block g and erase it (static wear
 * levelling; a checkpoint is taken first when none covers it).  0, AF_GC_RETIRED or -1. */
int af_gc_collect_block(uint32_t g);
/* At boot, before the host's first command (af_ftl_start leaves its pairs held): collect below `low` erased
 * blocks with every page GC's, since nothing of the host's is in the core -- a power cut during heavy GC
 * can leave only the block the core writes, too few pages for any victim beside the block kept for the
 * core's commands -- then let the host in. */
void af_gc_boot(void);
/* From the idle loop: foreground below `low` free blocks (host held), background below `high` when quiet. */
void af_gc_poll(void);

#endif
