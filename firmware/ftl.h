/* atomflash firmware: owning the FTL core (soc/ftl_bridge.py); its registers are ftlcore.h's.
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
 * Blocks the firmware gives the core are only ever erased ones; GC (gc.c)
 * makes more.  When no erased block is left the core raises `starved` and
 * writes wait until GC hands it one. */
#ifndef AF_FTL_H
#define AF_FTL_H

#include <stdint.h>

#include "ftlcore.h"

/* After recovery (mount.c): hand the device to the core. 0 or -1 (printed). */
int af_ftl_start(void);
/* Erased blocks not yet written: the pool's and those queued in the core behind each die's open one. */
uint32_t af_ftl_erased_blocks(void);

/* Retire global block g (a program or erase failed in it): never in the pool again.
 * holds_data: the core writes it or it holds bound pages; GC moves them first (af_block_t.retire). */
void af_ftl_retire(uint32_t g, const char *why, int holds_data);

/* Take an erased block out of the free pool for the firmware's own use
 * (checkpoint areas): *g its global block number.  0, or -1 when the pool is empty. */
int af_ftl_pool_take(uint32_t *g);
/* Checkpoint-area rotation (ckpt_take.c): when global block *g has `spread` or more erases than the least-worn
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
/* GC erased global block g (ok), or its erase failed (!ok: retired).
 * Back to the free pool and on to the core.  0, or -1 when retired. */
int af_ftl_block_erased(uint32_t g, int ok);
/* An erase of free block g outside the FTL's own paths (the console's `nand test`): counted, in the
 * pool's wear beside it too (dynamic wear levelling reads that). */
void af_ftl_count_erase(uint32_t g);
/* Pages the log writer can still take without another erase: those not yet allocated in the blocks pushed
 * since start (every page allocated takes the next seq) and the pool's blocks. */
uint64_t af_ftl_room_pages(void);

/* Out of space (spec NoSpace, docs/firmware.md "Out of space").  af_ftl_space_check counts the good
 * blocks and the pages the block table holds: FULL when the good blocks, less GC's reserve, one open
 * block per die and the checkpoint areas, cannot hold those pages plus one block of headroom for GC (left one block later, so it
 * does not flap); it also refreshes spare_blocks.  GC sets GC_STUCK (af_ftl_set_no_space) when the pool is
 * down to the reserve and it found nothing to collect, and clears it once it collects again.  Either way
 * the core refuses commands that bring new data (ftl.host_enable.no_space); reads and the commands that
 * finish what is open go on. */
void af_ftl_space_check(void);
void af_ftl_set_no_space(uint32_t why);

#endif
