/* atomflash firmware: map checkpoints (docs/firmware.md, trap 8): the format, and loading the newest at boot.
 *
 * A checkpoint is the map (CKPT_ENTRY per LBA: vseq and page), the erase
 * counts and the per-block valid counts of that map, with a floor
 * seq S: every commit point with seq < S is in it.  Boot loads the newest
 * intact one and scans only the blocks written from S on (page 0's seq >= S,
 * or listed as open in the checkpoint), so recovery costs what was written
 * since, not the device size.
 *
 * Format: spec.CKPT_HDR / CKPT_ENTRY / CKPT constants.  Two areas of `narea`
 * blocks each, chosen from the free pool at the first checkpoint and named in
 * every header.  GC erases a block only when a durable checkpoint's floor is
 * above every page in it (trap 2): af_ckpt.seq is that floor.  Taking one is
 * ckpt_take.c's (above the FTL's free-block pool and the anchor, which it uses). */
#ifndef AF_CKPT_H
#define AF_CKPT_H

#include <stdint.h>

#include "fw.h"
#include "mapload.h"
#include "nand.h"

#define AF_CKPT_MAX_AREA_BLOCKS 16
#define AF_CKPT_NO_BLOCK UINT32_MAX /* an area slot whose block the boot found reused: the next take fills it */
#define AF_CKPT_MAX_OPEN 1024      /* blocks a header may list as open (recovery scans them) */
#define AF_CKPT_DEFAULT_INTERVAL 1024u /* pages the log writes between automatic checkpoints */

typedef struct {
	int valid;                 /* a checkpoint is on flash (loaded at boot or taken since) */
	uint64_t seq;              /* its floor */
	uint64_t at;               /* the log's next seq when it was taken (automatic checkpoints count from it) */
	uint64_t number;
	uint32_t area;             /* the area it is in */
	uint32_t pages;            /* its pages (header + map + wear) */
	uint32_t narea;            /* blocks per area (0: no areas yet) */
	uint32_t area_block[AF_CKPT_AREAS][AF_CKPT_MAX_AREA_BLOCKS]; /* global block numbers */
	uint32_t interval;         /* automatic: pages written since the floor (0: off) */
	uint32_t taken, failed, oob_reads, bad_entries;
	const char *last_failure;  /* why the last automatic one failed (warned once until one is taken) */
	uint32_t pages_written;     /* checkpoint pages programmed since boot (GET_LOG) */
	uint64_t t_last;           /* cycles the last one took */
	int from_console;          /* the running one was asked for (errors, not warnings) */
	uint32_t *shadow_ppa;      /* per LBA: the page whose vseq af_flash.map.vseq holds */
	uint32_t *shadow_erases;   /* per block: its erase count when shadow_ppa was brought up to date (an entry
				    * whose block was erased since may name the same PPA for a newer version) */
	uint32_t *map_crc;         /* per map page: its CRC (format 3; the loaded checkpoint's, then the take's) */
	uint8_t *page;             /* one page of data */
	/* boot */
	int loaded;                /* boot loaded one */
	uint32_t format;           /* its CKPT_HDR.format */
	uint32_t nopen;            /* open blocks it listed */
	const uint32_t *open_ppa;  /* boot: the loaded header's list of them (block PPAs) */
	uint32_t tried;            /* headers found that were not intact */
	uint32_t retired;          /* grown bad blocks it named */
	uint32_t retiring;         /* blocks it named retiring (a program failed, data not all moved yet) */
	int bbt;                   /* it carried the factory bad-block table (format 4): no marker reads at boot */
	uint32_t areas_dropped;    /* other-area blocks its header named that hold no checkpoint now (replaced at the next take) */
	uint32_t rotated;          /* area blocks swapped for less-worn erased ones since boot */
	uint64_t seen_number;      /* the highest header number on flash at boot, intact or not (new ones go above) */
} af_ckpt_t;

extern af_ckpt_t af_ckpt;

/* Map pages of a checkpoint of `nlba` LBAs. */
static inline uint32_t af_ckpt_map_pages(uint64_t nlba)
{
	return (uint32_t)((nlba + AF_MAP_ENTRIES_PER_PAGE - 1) / AF_MAP_ENTRIES_PER_PAGE);
}
/* Pages of the map pages' CRCs (format 3: one u32 each). */
static inline uint32_t af_ckpt_crc_pages(uint32_t map_pages)
{
	return (map_pages + af_nand.page_data / 4 - 1) / (af_nand.page_data / 4);
}
/* Page `index` of the checkpoint in `area`. */
static inline uint32_t af_ckpt_page_ppa(uint32_t area, uint32_t index)
{
	uint32_t g = af_ckpt.area_block[area][index / af_nand.pages_per_block];
	return AF_PPA_PPA_PAGE_SET(af_nand_block_ppa(g), index % af_nand.pages_per_block);
}
/* Pages of erase counts a checkpoint of `nblocks` blocks carries after its map pages (as many
 * valid-count pages follow them). */
uint32_t af_ckpt_wear_pages(uint32_t nblocks);
/* All pages of a checkpoint of `nlba` LBAs on a device of `nblocks` blocks. */
uint32_t af_ckpt_pages_for(uint64_t nlba, uint32_t nblocks);

/* Where the newest checkpoint is, as the anchor's newest record says (anchor.h): the checkpoint the record
 * was written after (base), the record's own seq (a format-5 header names the newest record when it was
 * built), and the areas' blocks. */
typedef struct {
	uint64_t base, seq;
	uint32_t narea;
	uint32_t area[AF_CKPT_AREAS][AF_CKPT_MAX_AREA_BLOCKS];
} af_ckpt_where_t;

/* Boot: load the checkpoint whose header is page 0 of global block `g` into
 * af_flash.map (ppa, vseq) and af_ckpt; marks its areas and open blocks.  With `where` (the boot read page 0
 * of the anchor's blocks only), only the checkpoint the anchor's record belongs to, in its areas (else -2).
 * 0, or -1 when it is not intact (nothing changed but the map, which the caller clears). */
int af_ckpt_load(uint32_t g, const af_ckpt_where_t *where);
/* Program one page (data: page_data bytes, then the OOB record) through the sync slot.  0 or -1. */
int af_ckpt_program_page(uint32_t ppa, const void *data, const af_oob_t *oob);
/* An OOB record for a checkpoint page. */
void af_ckpt_oob(af_oob_t *oob, uint32_t index, uint32_t total, uint64_t seq, uint64_t number);
/* The shadow (shadow_ppa) is up to date: note every block's erase count with it.  A take reads an
 * entry's vseq again when its PPA changed or its block was erased since: after an erase the same PPA
 * may hold a newer version of the same LBA. */
void af_ckpt_shadow_erases(void);

#endif
