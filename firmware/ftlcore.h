/* atomflash firmware: the FTL core's registers (soc/ftl_bridge.py), and the firmware's state of it.
 *
 * Register access only: the core's identity and shape, its map-cache port,
 * the log's next seq and the transactions' floor, the host-enable register,
 * and the firmware's own queue pair (the core's last: the firmware is also a
 * host, for checkpoints, GC's read fence, the console's `io` and `selftest`).
 * What to do with the core -- the free-block pool, running out of space,
 * starting it after recovery -- is ftl.c's, above the checkpoints and the
 * anchor; af_ftl holds that state too, so the layers in between (the anchor's
 * plan reads the pool) see it without calling up.
 *
 * Waiting on the core may need the layers above to act (af_ftl_hooks): a host
 * request the core holds for a map segment not loaded yet (mapload.c), or a
 * command of the firmware's own stuck behind writes starved of blocks (ftl.c).
 * They register what to run; this file calls nothing above it. */
#ifndef AF_FTLCORE_H
#define AF_FTLCORE_H

#include <stdint.h>

#include "fw.h"

#define AF_FTL_MAX_DIES 64
#define AF_FTL_GC_RESERVE AF_LIMITS_GC_RESERVE_BLOCKS /* free blocks only GC relocation may use (gc.c) */
#define AF_FTL_IO_PAGES 8 /* pages af_ftl.io_buf holds (the console's `io` moves up to this many) */

typedef struct {
	int present;                /* the FTL core is in this build and answered */
	int running;                /* af_ftl_start succeeded: host interface on */
	uint32_t channels, ways, queue_pairs, fw_slot, scratch_pages, free_depth;
	uint32_t dies;              /* channels * ways (LUN 0 of every target) */
	uint32_t block_shift;       /* block-table index = die << block_shift | block */
	uint64_t capacity;          /* LBAs the host may address */
	uint32_t *bt;               /* the core's block table: dies << block_shift valid counts */
	void *scratch, *gc_buf;
	af_identify_t *identify;
	af_log_page_t *log;         /* GET_LOG page (main.c refreshes it while idle) */
	uint16_t *pool;             /* per die: a stack of erased blocks (blocks_per_lun entries each) */
	uint32_t *pool_wear;        /* beside each pool entry: its block's erase count (fixed while it is pooled), so
				     * picking the least worn reads a dense array, not a block-table line per block */
	uint32_t pool_n[AF_FTL_MAX_DIES];
	uint8_t handed[AF_FTL_MAX_DIES]; /* blocks given to the die and not closed yet */
	uint32_t pushed, closed, free_blocks, erased;
	uint32_t program_failures;  /* pages the core reported failed (ftl.failed); their blocks retire */
	int failed_lost_seen;       /* ftl.status.failed_lost was reported */
	uint32_t retiring;          /* blocks waiting for GC to move their data before they retire */
	int gc_active;              /* GC relocates with the host held: the reserve may be handed out */
	int host_held;              /* the host's pairs held beyond GC's victims: from boot to the end of the boot's GC
	                             * (gc.c af_gc_boot), and between a foreground episode's victims (af_gc_poll) */
	int host_admitted;          /* the host's pairs were fetched since boot (0: no host command in the core) */
	int host_drained;           /* held, and none of the host's commands left in the core (gc.c drain_host);
				     * cleared when the hold ends */
	int fw_waiting;             /* the firmware waits for its own command behind a starved core: so may it */
	uint32_t late_completions; /* answers to firmware commands whose wait had given up, discarded */
	int gc_stuck;               /* GC found nothing to collect with the erased blocks down to its reserve (gc.c
				     * sets it whatever no_space says, FULL included): the reserve goes to the core */
	uint32_t no_space;          /* AF_NOSPACE_*: why writes complete with NO_SPACE (ftl.host_enable.no_space) */
	int no_blocks;              /* out of space, the core starved and the pool empty: no page will come, the
				     * core completes what waits for one NO_SPACE (ftl.host_enable.no_blocks) */
	uint32_t spare_blocks;      /* good blocks beyond what the capacity needs (grown bad blocks eat them) */
	uint32_t good_blocks;       /* good blocks of LUN 0 (the core's and the checkpoint areas') */
	uint32_t held_blocks;       /* blocks the capacity leaves out: GC's reserve, an open one per die, the checkpoint areas */
	uint64_t live_pages;        /* pages the block table counts (bound or staged), at the last space check */
	int space_dirty;            /* a block closed, was erased or retired since the last space check */
	uint64_t start_seq;
	int trace;                  /* print GC's victims, checkpoints taken for them, wear's look (console `gc trace`) */
	/* the firmware's own queue pair */
	af_cmd_t *sq;
	af_cpl_t *cq;
	uint32_t qid, qsize, sq_tail, cq_head, phase;
	uint16_t next_cid;
	void *io_buf;               /* one page of data for af_ftl_io */
	void *cache;                /* the core's volatile write cache (ftl.cache_pages pages; NULL: none) */
	uint32_t cache_pages;
} af_ftl_t;

extern af_ftl_t af_ftl;

/* What the layers above run while the firmware spins on the core (NULL: nothing):
 *   map_need   before a map-port request names an LBA: its segment in memory (mapload.c sets it while the
 *              map loads lazily: a request for a segment not loaded would wait until someone loads it)
 *   map_fault  every 256 spins on the map port or a status bit: the segment a host request waits for
 *              (mapload.c; what the firmware waits for may wait behind that request); 1 when it loaded one
 *   upkeep     every 64 spins of af_ftl_reap: the core's streams, blocks for a starved core (ftl.c sets it
 *              as the core starts: the firmware's command may wait behind writes starved of blocks) */
typedef struct {
	void (*map_need)(uint32_t lba);
	int (*map_fault)(void);
	void (*upkeep)(void);
} af_ftl_hooks_t;

extern af_ftl_hooks_t af_ftl_hooks;

/* Is the FTL core in this build (reads its identity)? Fills the geometry. */
int af_ftl_probe(void);
/* Wait until the status bits clear (serving map faults meanwhile): 0, or -1 after a long time. */
int af_ftl_wait_clear(uint32_t status_bits);
/* A request on the firmware's map-cache port (AF_MAPFWOP_*).  Returns the
 * map_result bits (AF_FTL_MAP_RESULT_*), or -1 on timeout; *old gets the
 * entry before the request. */
int af_ftl_map(unsigned op, uint32_t lba, uint32_t value, uint32_t expected, uint32_t *old);
/* Valid pages the core's block table counts in global block g now (the map's and staged ones). */
uint32_t af_ftl_valid_of(uint32_t g);
/* Die and block-table index of a PPA in the core's order. */
uint32_t af_ftl_die_of(uint32_t ppa);
/* Global block number (nand.h) of `block` on die `die`. */
uint32_t af_ftl_gblock(uint32_t die, uint32_t block);
/* The seq the log writer gives its next page (ftl.seq_next). */
uint64_t af_ftl_seq_next(void);
/* First vseq of the oldest transaction not yet committed or aborted, or append not yet remapped or released
 * (ftl.tx_floor; UINT64_MAX: none), as of when it is called (it waits two passes of the core's append
 * scanner): a checkpoint's floor must not be above it, or recovery would miss those pages. */
uint64_t af_ftl_tx_floor(void);
/* Write ftl.host_enable from af_ftl (enable, gc_active or host_held -> hold, no_space, no_blocks). */
void af_ftl_host_ctrl(void);
/* Commands that may still take pages: those the core fetched from the host's pairs and has not completed
 * (SQ head minus CQ tail; the core holds fewer commands than a queue has entries, so it does not wrap),
 * and those the firmware submitted on its own pair and the core has not completed. */
uint32_t af_ftl_in_core(void);
/* Of them, the firmware's own: submitted on its pair (never held) and not completed yet. */
uint32_t af_ftl_fw_in_core(void);

/* The firmware's queue pair (the core's last): set up before the host comes on.  0, or -1 when refused. */
int af_ftl_queue_setup(void);
/* One command through the firmware's queue pair; waits for its completion.
 * Returns the status code (AF_STATUS_*), or -1 when no completion came. */
int af_ftl_io(af_cmd_t *cmd, uint64_t *result);
/* af_ftl_io in two halves, so the CPU can work while the core runs the command:
 * submit (fills in cid; -1 when the core is not running), then wait for that
 * completion.  Nothing else may use the queue pair in between. */
int af_ftl_submit(af_cmd_t *cmd);
int af_ftl_wait(const af_cmd_t *cmd, uint64_t *result);
/* With several commands submitted (up to the queue's size less one): the next completion, whichever
 * it is for; *cid names it.  Its status, or -1 when none came.  opcode: for the warning a long wait gives. */
int af_ftl_reap(unsigned opcode, uint16_t *cid, uint64_t *result);

/* Pretty lines for `info`/`stats`. */
void af_ftl_print(const char *prefix);

#ifdef AFCTRL_FTL
static inline uint32_t ftl_rd(uint32_t off)
{
	return *(volatile uint32_t *)(AFCTRL_BASE + AFCTRL_FTL_OFFSET + off);
}
static inline void ftl_wr(uint32_t off, uint32_t v)
{
	*(volatile uint32_t *)(AFCTRL_BASE + AFCTRL_FTL_OFFSET + off) = v;
}
static inline uint32_t hostq_rd(uint32_t off)
{
	return *(volatile uint32_t *)(AFCTRL_BASE + AFCTRL_HOSTQ_OFFSET + off);
}
static inline void hostq_wr(uint32_t off, uint32_t v)
{
	*(volatile uint32_t *)(AFCTRL_BASE + AFCTRL_HOSTQ_OFFSET + off) = v;
}
/* A register field: (v & mask) >> shift. */
static inline uint32_t ftl_field(uint32_t v, uint32_t mask, unsigned shift)
{
	return (v & mask) >> shift;
}
#endif

#endif
