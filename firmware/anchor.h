/* atomflash firmware: the anchor log and the allocation plan (a boot flat in device size).
 *
 * Without them a boot reads page 0 of every block, for two reasons: the
 * newest checkpoint's header is page 0 of an area block, and areas move (wear
 * rotation, a failed erase); and the blocks written since the checkpoint's
 * floor are those whose page 0 has a seq at or above it.  Both grow with the
 * device.  The anchor removes both (spec ANCHOR, ANCHOR_HDR):
 *
 *   - Two fixed blocks, the first good ones of LUN 0 of target 0 (a few raw
 *     marker reads find them), hold an append-only log of one-page records.
 *     Each names both checkpoint areas' blocks and a *plan*: every block the
 *     firmware handed to the core, or may hand to it, since the header of
 *     checkpoint `base` was built.
 *   - The core gets only planned blocks (af_ftl_refill).  When a die has
 *     none left, the plan is topped up for every die and a record is
 *     programmed first (one page per ANCHOR_TOP_UP blocks a die).  A record
 *     is also programmed before the areas change (before the first
 *     checkpoint page goes into a new area block), after each checkpoint
 *     (a fresh plan: what was handed out before its header is in its open
 *     list or below its floor), after each boot, and after a block retires:
 *     records list the grown bad blocks too, so a boot knows them before a
 *     checkpoint does (a full device may take none) instead of erasing them
 *     again.
 *   - A format-5 checkpoint says which blocks were free (CKPT.WEAR_FREE) and
 *     which record was the newest when its header was built.
 *
 * The boot then reads the markers of the first few blocks of target 0, the
 * anchor (page 0 of both blocks, a binary search for the first erased page,
 * the last intact record), page 0 of the two areas' first blocks, the
 * checkpoint, and page 0 of the checkpoint's open blocks and the plan's:
 * bounded by what was written since the checkpoint, not by the device.  It
 * takes that path only when the record belongs to the checkpoint it loads
 * (the record's base is that checkpoint, or the record is the one the
 * checkpoint's header names); otherwise -- no anchor, no record, a record
 * whose plan did not fit a page (FLAG_NO_PLAN), an older checkpoint format --
 * it reads page 0 of every block as before.  Getting this wrong costs boot
 * time, never data: the full pass is always correct.
 *
 * Records (format 2) also carry the drive's NVMe power-on counters: a boot
 * counts one power cycle more than the newest record, and one unsafe
 * shutdown more unless that record is FLAG_SHUTDOWN_CLEAN -- programmed by
 * af_anchor_shutdown once a host's shutdown notification completed, after
 * its flush and checkpoint; any later record clears it.
 *
 * When no record can be written (both anchor blocks fail), the anchor is
 * *dead*: areas stay where they are, and the core gets only blocks of the
 * last durable plan until a checkpoint naming no record is on flash (from
 * then on every boot takes the full pass). */
#ifndef AF_ANCHOR_H
#define AF_ANCHOR_H

#include <stdint.h>

#include "ckpt.h"
#include "fw.h"

/* The anchor is written and used only when this is 1 (tb/soc/test_soc_anchor.py; the campaign's judge
 * checks its coverage after every cut).  With 0 every boot reads page 0 of every block,
 * checkpoints (format 5) name no record, and the capacity keeps no blocks for it. */
#define AF_ANCHOR_ENABLED 1

/* Blocks a die's plan is topped up to (not yet handed out) when it runs dry. */
#define AF_ANCHOR_TOP_UP 4u

#define AF_PLAN_OFF 0    /* no anchor on this device: blocks are handed out freely, boots read every page 0 */
#define AF_PLAN_ON 1     /* the core gets planned blocks only */
#define AF_PLAN_NONE 2   /* a durable FLAG_NO_PLAN record: handed out freely until the next checkpoint */
#define AF_PLAN_DEAD 3   /* no record can be written: planned blocks only until a checkpoint naming no record */

typedef struct {
	int found;           /* the anchor blocks exist (two good blocks among the first ANCHOR.SEARCH) */
	int mode;            /* AF_PLAN_* */
	uint32_t block[AF_ANCHOR_BLOCKS]; /* global block numbers */
	uint32_t cur;        /* the block the next record goes in (index into block) */
	uint32_t next_page;  /* its page for the next record (pages_per_block: full, the other block next) */
	int have;            /* a durable record exists (read at boot or written since) */
	uint64_t seq;        /* the newest durable record's */
	uint8_t flags;
	uint64_t base;
	uint32_t narea;      /* its areas: what the boot may trust, and what a take compares with */
	uint32_t area[AF_CKPT_AREAS][AF_CKPT_MAX_AREA_BLOCKS];
	uint32_t nplan;      /* boot: the plan of the record read (global block numbers in plan) */
	uint32_t *plan;
	uint32_t nbad;       /* boot: its grown bad blocks (global block numbers, right after the plan) */
	uint32_t *bad;
	uint32_t cap;        /* entries `plan` holds, with the bad list */
	int bad_dirty;       /* a block retired since the newest record: af_anchor_poll writes one */
	uint8_t *page;       /* one page of data */
	/* this boot's NVMe power-on counters (SMART Power Cycles, Unsafe Shutdowns): every record carries them */
	uint64_t power_cycles, unsafe_shutdowns;
	int boot_record;     /* the boot found a record to count from */
	int boot_clean;      /* ... and it was ANCHOR.FLAG_SHUTDOWN_CLEAN */
	/* counters */
	uint32_t written, program_failures, erases, reads, extends;
	uint32_t boot_torn;  /* pages after the newest intact record at boot that were not intact */
	uint64_t t_boot;     /* cycles the boot spent finding it */
} af_anchor_t;

extern af_anchor_t af_anchor;

/* Boot, before anything else reads the flash's blocks: find the anchor blocks (raw markers) and the newest
 * intact record in them (af_anchor.have, its fields and plan), and count this boot from it
 * (af_anchor.power_cycles, unsafe_shutdowns).  Marks the blocks (af_block_t.anchor). */
void af_anchor_boot(void);
/* Where the newest record says the newest checkpoint is (af_ckpt_load's fast path). */
void af_anchor_where(af_ckpt_where_t *w);
/* A block was retired (ftl.c, gc.c): the next af_anchor_poll writes a record naming it. */
void af_anchor_retired(void);
/* The main loop, outside any NAND sequence: a record when a block retired since the last one. */
void af_anchor_poll(void);
/* Boot, after the checkpoint's table: mark the newest record's grown bad blocks retired (they may be
 * newer than any checkpoint).  How many were not marked yet. */
uint32_t af_anchor_apply_bad(void);
/* Program a record: areas from af_ckpt, base = the newest checkpoint, plan = every block with
 * af_flash.planned set (or none with ANCHOR.FLAG_NO_PLAN), and the grown bad blocks that fit.  0; -1 when
 * the plan did not fit a page (nothing written); -2 when no page could be programmed (the anchor is dead,
 * said on the console). */
int af_anchor_write(uint8_t flags);
/* A host's shutdown notification completed (its flush and checkpoint are durable): a record with
 * ANCHOR.FLAG_SHUTDOWN_CLEAN, so the next boot counts no unsafe shutdown unless a later record clears it.
 * As af_anchor_write; -2 also when this device keeps no records (no anchor, or it is dead). */
int af_anchor_shutdown(void);
/* Do af_ckpt's areas differ from the newest durable record's? */
int af_anchor_areas_changed(void);
/* The record word a checkpoint header carries (format 5): the newest durable record's seq, or 0 when no
 * boot may trust the anchor with this checkpoint. */
uint32_t af_anchor_header_word(void);

/* The plan (ftl.c): may the core get global block g now? */
int af_plan_allows(uint32_t g);
/* Top up every die's plan and program a record (af_ftl_refill, when a die has no planned block left;
 * af_ftl_start).  0, or -1: nothing more may be handed out. */
int af_plan_extend(void);
/* af_ftl_start, before the core gets a block: a record of this boot's plan (what it scanned, topped up).
 * af_ftl_start's pass over the blocks has set af_flash.planned where af_plan_boot_mark(b) (one pass
 * over the table, not two: the boot's CPU time grows with each). */
#define af_plan_boot_mark(b) (af_anchor.mode == AF_PLAN_ON && (b)->scan && !(b)->flags)
void af_plan_boot(void);
/* Pages of an anchor block that take records (MLC: the lower pages only). */
uint32_t af_anchor_usable_pages(void);
/* `ckpt` / `info`: the anchor's state, one line each, prefixed. */
void af_anchor_print(const char *prefix);
/* A checkpoint is durable: a fresh plan (the blocks already handed out are in its header or below its floor). */
void af_plan_checkpointed(void);

#endif
