/* atomflash firmware: the flash as the boot finds it: the block table, the map, and the passes that read it.
 *
 * The boot's steps, which mount.c runs in order with the anchor and the newest
 * checkpoint in between (mount.h):
 *
 *   af_flash_bringup   NAND bring-up (nand.c: RESET, READ ID, parameter page of
 *                      every target, fastest common timing mode), the tables
 *   af_flash_p0_pass   page 0 of every block (or of the blocks marked with
 *                      af_flash_cand): checkpoint headers, each block's first seq
 *   af_flash_bbt_pass  the factory markers (the first spare byte(s) of page 0 of
 *                      every block, read raw; AF_NAND_BBM_BYTES; not FFh = bad)
 *   af_flash_select    which blocks recovery reads
 *   af_flash_recover   recovery (recovery.c): the OOB record of every page of the
 *                      selected blocks, read with ECC, pipelined over all
 *                      targets; record pages' payloads read on demand;
 *                      af_rec_finish; per-block valid counts; its report.
 *
 * Tables live in main RAM, sized from the geometry read from the device:
 * the map (one LBA per flash page: ppa, vseq, cseq), the block table, and
 * recovery's scan table (48 bytes per written page; released after boot). */
#ifndef AF_FLASH_H
#define AF_FLASH_H

#include <stdint.h>

#include "recovery.h"

#define AF_BLOCK_BAD 0x01      /* factory bad (marker not FFh) */
#define AF_BLOCK_UNREADABLE 0x02 /* the marker read failed: treated as bad */
#define AF_BLOCK_RETIRED 0x04  /* an erase or program failed since boot (grown bad) */

/* Block states the firmware tracks (af_block_t.state): the FTL core's once it runs (ftl.c). */
#define AF_BSTATE_DATA 0   /* written (or unreadable): not the core's, not free */
#define AF_BSTATE_FREE 1   /* erased, in the firmware's pool */
#define AF_BSTATE_CORE 2   /* handed to the core (queued or open) */
#define AF_BSTATE_CKPT 3   /* a checkpoint area's (ckpt.h) */
#define AF_BSTATE_GC 4     /* being collected (gc.c) */
#define AF_BSTATE_RETIRED 5 /* grown bad: a program or erase failed, its data moved; never used again */


typedef struct {
	uint32_t valid;   /* pages holding a bound LBA's version (recovered map) */
	uint16_t written; /* pages not erased */
	uint16_t torn;    /* pages present but not intact (recovery: absent) */
	uint8_t flags;    /* AF_BLOCK_* */
	uint8_t state;    /* AF_BSTATE_* */
	uint8_t p0;       /* page 0 at boot: AF_P0_* */
	uint8_t scan;     /* recovery scans it (written since the checkpoint's floor, or open then) */
	uint8_t scan_end; /* the scan met its first erased page: the written prefix ends there (docs/recovery.md) */
	uint8_t needs_erase; /* found erased at boot (pages past the first erased one never read): erase before use */
	uint8_t retire;   /* a program failed in it: GC moves its bound pages, then it is retired */
	uint8_t anchor;   /* an anchor block (anchor.h) */
	uint8_t rsvd;
	uint8_t ckpt_free; /* boot: the checkpoint loaded says it was in the free pool (format 5) */
	uint8_t cand;     /* boot: page 0 read in the fast path (open in the checkpoint, or planned) */
	uint8_t torn_end; /* its written prefix ends in a data page whose data does not read (torn by a cut) */
	uint32_t erases;  /* erase count (wear.c): saved in checkpoints, counted since */
	uint64_t close_seq; /* every page in it has a smaller seq (GC erases it once a checkpoint floor passes it) */
} af_block_t;

/* One entry is one data-cache line (VexRiscv's are 32 bytes; the table is allocated on a line): the
 * boot's and GC's passes over every block are bound by line fills from main RAM, so a field added here
 * costs every pass (what only the boot's page-0 pass needs is in af_p0_t). */
_Static_assert(sizeof(af_block_t) == 32, "af_block_t is one cache line");

/* What page 0's OOB record said, per block (the page-0 pass; AF_P0_INTACT, AF_P0_CKPT) */
typedef struct {
	uint64_t seq;     /* its seq */
	uint64_t num;     /* its vseq: a checkpoint header's number */
	uint8_t kind;     /* its kind */
} af_p0_t;

#define AF_P0_ERASED 0
#define AF_P0_INTACT 1   /* an intact OOB record */
#define AF_P0_CKPT 2     /* the header page of a checkpoint */
#define AF_P0_TORN 3     /* programmed, not intact or unreadable */
#define AF_P0_ANCHOR 4   /* an anchor record (anchor.h) */

typedef struct {
	int nand_ok;              /* bring-up succeeded */
	int fast;                 /* the boot reads page 0 of the anchor's blocks only (anchor.h) */
	const char *full_why;     /* why it read page 0 of every block (NULL: it did not) */
	uint32_t p0_reads;        /* page-0 reads at boot */
	int scanned;              /* recovery ran to the end */
	uint32_t nlba;
	uint32_t nblocks;
	uint32_t bad_blocks;
	af_block_t *blocks;       /* nblocks entries (global block numbers, nand.h) */
	/* nblocks bytes: in the anchor's plan, 1 in a durable record, 2 in the one being written (anchor.c);
	 * dense, not in af_block_t: the plan's passes read it for every pooled block, a line fill each there */
	uint8_t *planned;
	uint32_t retired_marks;   /* blocks given AF_BLOCK_RETIRED since boot: none, and a record lists no bad block */
	af_p0_t *p0;              /* nblocks entries: page 0's record (boot) */
	af_rec_map_t map;
	af_rec_tally_t tally;     /* the map's valid counts, bound and lost LBAs while recovery builds it */
	uint32_t *counts;         /* nblocks: the tally's counts at boot, the checkpointer's scratch after */
	af_rec_report_t report;
	uint32_t bound;           /* LBAs bound after recovery */
	uint32_t lost;            /* bound LBAs no intact page holds */
	uint32_t scan_cap;        /* recovery scan table entries */
	uint32_t scan_full;       /* pages not scanned: the table was full */
	uint32_t read_errors;     /* page reads that failed (controller or descriptor errors) */
	uint32_t erased_since_boot; /* block erases since boot (GET_LOG) */
	uint32_t record_reads;    /* data-area reads at boot: record pages, and the data page ending each block */
	uint64_t t_bringup, t_bbt, t_p0, t_ckpt, t_scan, t_finish; /* cycles per phase */
	uint32_t blocks_scanned;  /* blocks recovery read, up to their first erased page */
	uint32_t scan_skipped;    /* pages read ahead past a block's first erased page, not scanned */
	uint32_t ram_used;        /* main RAM bytes the tables take after boot */
	uint32_t ram_peak;        /* ... and during recovery */
} af_flash_t;

extern af_flash_t af_flash;

/* Controller and device geometry (as read from the device), one line each, prefixed. */
void af_flash_print_geometry(const char *prefix);

/* NAND bring-up, its report lines, and the tables (cleared).  0, or < 0 (printed). */
int af_flash_bringup(void);
/* Mark global block g for the page-0 pass of the candidates only (af_block_t.cand, and its row for the
 * walk); af_flash_cand_clear forgets the rows marked before. */
void af_flash_cand_clear(void);
void af_flash_cand(uint32_t g);
/* Page 0's OOB record of every block, or only of the candidates (cand_only) into af_block_t.p0 and
 * af_flash.p0; t_p0.  0, or < 0 (printed). */
int af_flash_p0_pass(int cand_only);
/* The factory bad-block markers of every block into af_block_t.flags; t_bbt.  0, or < 0 (printed). */
int af_flash_bbt_pass(void);
/* Which blocks recovery reads (af_block_t.scan): with a checkpoint (have_ckpt, its floor), those written
 * from its floor on (page 0 newer, torn, or open then); the anchor's and the checkpoint areas' (state
 * AF_BSTATE_CKPT, marked by the caller) never: their pages prove nothing.  Counts the factory bad
 * blocks for the report: *factory, the first 16 of them in first_bad. */
void af_flash_select(int have_ckpt, uint64_t floor, uint32_t *factory, uint32_t *first_bad);
/* Recovery over the selected blocks and the checkpoint's map (ck; NULL: none, the map cleared), the valid
 * counts, af_flash.scanned, the report's recovery lines.  need(lba): recovery is about to use lba's map
 * entry (a lazily loaded map: its segment in memory); 1 when it may have read through the sync slot.
 * 0, or < 0 (printed). */
int af_flash_recover(const af_rec_checkpoint_t *ck, int (*need)(uint32_t lba));

/* "12.345 ms": simulated time at the nominal clock, for the boot report */
void af_print_ms(uint64_t cycles);

#endif
