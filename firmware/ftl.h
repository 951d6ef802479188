/* atomflash firmware: owning the FTL core (soc/ftl_bridge.py).
 *
 * The core runs the per-command path by itself; the firmware gives it what it
 * cannot know and takes back what it hands out:
 *
 *   af_ftl_start()  after recovery: the memory layout (the recovered map is
 *                   the core's L2P table; its block table in the core's
 *                   order), the capacity, the IDENTIFY record, the map cache
 *                   invalidated (block RAM survives a reset), the log's next
 *                   seq, erased blocks to every die, then the host interface.
 *   af_ftl_poll()   from the console's idle loop: full blocks come back on
 *                   `closed`, each die gets another erased block.
 *
 * Blocks the firmware gives the core are only ever erased ones.  With no GC
 * yet, blocks written before this boot stay as they are (their pages hold
 * the recovered data and the proofs recovery needs), so a device fills up:
 * when no erased block is left the core raises `starved` and writes wait.
 *
 * The firmware is also a host: the core's last queue pair is its own
 * (af_ftl_io), for the console's `io` command and `selftest`. */
#ifndef AF_FTL_H
#define AF_FTL_H

#include <stdint.h>

#include "fw.h"

#define AF_FTL_MAX_DIES 64
#define AF_FTL_GC_RESERVE AF_LIMITS_GC_RESERVE_BLOCKS /* free blocks only GC relocation may use (gc.c) */
#define AF_FTL_IO_PAGES 8 /* pages af_ftl.io_buf holds (the console's `io` moves up to this many) */

/* Block states the firmware tracks (af_block_t.state). */
#define AF_BSTATE_DATA 0   /* written (or unreadable): not the core's, not free */
#define AF_BSTATE_FREE 1   /* erased, in the firmware's pool */
#define AF_BSTATE_CORE 2   /* handed to the core (queued or open) */
#define AF_BSTATE_CKPT 3   /* a checkpoint area's (ckpt.h) */
#define AF_BSTATE_GC 4     /* being collected (gc.c) */
#define AF_BSTATE_RETIRED 5 /* grown bad: a program or erase failed, its data moved; never used again */

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
	int fw_waiting;             /* the firmware waits for its own command behind a starved core: so may it */
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

/* Is the FTL core in this build (reads its identity)? Fills the geometry. */
int af_ftl_probe(void);
/* After recovery (flash.c): hand the device to the core. 0 or -1 (printed). */
int af_ftl_start(void);
/* Erased blocks not yet written: the pool's and those queued in the core behind each die's open one. */
uint32_t af_ftl_erased_blocks(void);

/* Retire global block g (a program or erase failed in it): never in the pool again.
 * holds_data: the core writes it or it holds bound pages; GC moves them first (af_block_t.retire). */
void af_ftl_retire(uint32_t g, const char *why, int holds_data);

/* Global block number (nand.h) of `block` on die `die`. */
uint32_t af_ftl_gblock(uint32_t die, uint32_t block);

/* Take an erased block out of the free pool for the firmware's own use
 * (checkpoint areas): *g its global block number.  0, or -1 when the pool is empty. */
int af_ftl_pool_take(uint32_t *g);
/* Checkpoint-area rotation (ckpt.c): when global block *g has `spread` or more erases than the least-worn
 * block of the free pool, take that block for the area instead (*g = it) and put the old one in the pool
 * (to be erased before use).  1 when swapped, 0 when not. */
int af_ftl_pool_rotate(uint32_t *g, uint32_t spread);
/* Give die its erased blocks (up to the core's queue; the reserve only while GC relocates). */
void af_ftl_refill(uint32_t die);
/* af_ftl_refill of every die, a block per die at a time: the erases blocks need before use (those whose
 * page 0 alone the boot saw erased, ~tBERS each) run on every die at once, not one after another. */
void af_ftl_refill_all(void);
/* Service the core's streams; cheap when nothing happened. */
void af_ftl_poll(void);
/* A request on the firmware's map-cache port (AF_MAPFWOP_*).  Returns the
 * map_result bits (AF_FTL_MAP_RESULT_*), or -1 on timeout; *old gets the
 * entry before the request. */
int af_ftl_map(unsigned op, uint32_t lba, uint32_t value, uint32_t expected, uint32_t *old);
/* Valid pages the core's block table counts in global block g now (the map's and staged ones). */
uint32_t af_ftl_valid_of(uint32_t g);
/* Die and block-table index of a PPA in the core's order. */
uint32_t af_ftl_die_of(uint32_t ppa);
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
/* GC erased global block g (ok), or its erase failed (!ok: retired).
 * Back to the free pool and on to the core.  0, or -1 when retired. */
int af_ftl_block_erased(uint32_t g, int ok);
/* An erase of free block g outside the FTL's own paths (the console's `nand test`): counted, in the
 * pool's wear beside it too (dynamic wear levelling reads that). */
void af_ftl_count_erase(uint32_t g);
/* The seq the log writer gives its next page (ftl.seq_next). */
uint64_t af_ftl_seq_next(void);
/* Pages the log writer can still take without another erase: those not yet allocated in the blocks pushed
 * since start (every page allocated takes the next seq) and the pool's blocks. */
uint64_t af_ftl_room_pages(void);

/* First vseq of the oldest transaction not yet committed or aborted, or append not yet remapped or released
 * (ftl.tx_floor; UINT64_MAX: none), as of when it is called (it waits two passes of the core's append
 * scanner): a checkpoint's floor must not be above it, or recovery would miss those pages. */
uint64_t af_ftl_tx_floor(void);
/* Out of space (spec NoSpace, docs/firmware.md "Out of space").  af_ftl_space_check counts the good
 * blocks and the pages the block table holds: FULL when the good blocks, less GC's reserve, one open
 * block per die and the checkpoint areas, cannot hold those pages plus one block of headroom for GC (left one block later, so it
 * does not flap); it also refreshes spare_blocks.  GC sets GC_STUCK (af_ftl_set_no_space) when the pool is
 * down to the reserve and it found nothing to collect, and clears it once it collects again.  Either way
 * the core refuses commands that bring new data (ftl.host_enable.no_space); reads and the commands that
 * finish what is open go on. */
void af_ftl_space_check(void);
void af_ftl_set_no_space(uint32_t why);
/* Write ftl.host_enable from af_ftl (enable, gc_active -> hold, no_space, no_blocks). */
void af_ftl_host_ctrl(void);
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
#endif

#endif
