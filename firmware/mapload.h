/* atomflash firmware: the checkpoint's map pages into the map, and the map loaded lazily (format 3).
 *
 * A map page of a checkpoint (spec CKPT_ENTRY per LBA) goes into af_flash.map
 * with af_map_take_page: at boot when the whole map is read (ckpt.c), or one
 * segment at a time as below.  What a checkpoint is, and which one, is
 * ckpt.c's (above): af_map_lazy_begin gets the area's blocks, the pages' CRCs
 * and the checkpoint's number, so this file knows nothing else of it.
 *
 * A boot does not read the checkpoint's map pages, most of what a checkpoint
 * is and the part that grows with the device.  It reads the header and the
 * pages after the map (erase counts, valid counts, the map pages' CRCs), and
 * recovery loads only the segments its commit points touch (af_map_need:
 * bounded by what was written since the checkpoint).  The host interface
 * comes on with the map cache's gate on (rtl/ftl/mapcache.py, ftl.map_lazy):
 * a host request that misses in a segment not yet in memory waits until
 * af_map_poll, from the idle loop, loads it (ftl.map_fault); otherwise the
 * idle loop loads the next segment in order, and when the last is in the
 * gate goes off.  A segment is 2**seg_shift LBAs, one checkpoint map page (or
 * several, when the gate has fewer bits than the map has pages).  Whatever
 * reads the table as a whole (a checkpoint) loads the rest first
 * (af_map_load_all); a map-port request names its LBA (af_ftl_map calls
 * af_map_need, through af_ftl_hooks while segments remain; so do the
 * firmware's waits on the core, for a host request held for its segment).  Each page is checked against its CRC as it loads; one that
 * does not read or check has its LBAs lost, said on the console (a boot that
 * read it whole would have fallen back to the older checkpoint, which after
 * GC's erases may no longer be whole either). */
#ifndef AF_MAPLOAD_H
#define AF_MAPLOAD_H

#include <stdint.h>

#include "nand.h"

/* CKPT_ENTRY records in a page. */
#define AF_MAP_ENTRIES_PER_PAGE (af_nand.page_data / sizeof(af_ckpt_entry_t))

typedef struct {
	int active;          /* segments remain to load */
	uint32_t seg_shift;  /* log2 LBAs per segment */
	uint32_t nseg, left; /* segments over the map's LBAs, and those not loaded */
	uint32_t cursor;     /* the idle loop's next candidate */
	uint8_t *loaded;     /* nseg flags */
	uint32_t cap;        /* flags allocated */
	/* the checkpoint's: its area's blocks (page 0 the header, map page q at page 1 + q), map pages, their
	 * CRCs, LBAs, number */
	const uint32_t *area_blocks;
	uint32_t map_pages, ck_nlba;
	const uint32_t *crc;
	uint64_t number;
	uint32_t *shadow;    /* the checkpointer's view of the map (af_map_copy_shadow): each segment loaded goes there too */
	uint32_t at_boot;    /* segments recovery needed before the host came on */
	uint32_t on_demand;  /* segments a waiting host request asked for */
	uint32_t page_errors; /* map pages that did not read or check (their LBAs lost) */
	uint32_t kept;       /* entries written before their segment loaded (a defect: the gate let them by) */
	int paused;          /* the idle loop loads none (`map load pause`): only what is needed */
	uint64_t t_done;     /* uptime when the last one loaded */
} af_mapload_t;

extern af_mapload_t af_mapload;

/* Map page q (0-based) of a checkpoint of nlba LBAs into af_flash.map: entries a word at a time from the page
 * buffer's words w, cseq zeroed (af_rec_finish needs no pass). */
void af_map_take_page(uint32_t q, uint32_t nlba, const volatile uint32_t *w);
/* From af_ckpt_load: the map of the checkpoint `number` (its area's blocks, map pages, each page's CRC, LBAs)
 * lazily this time (0), or -1: load it whole now. */
int af_map_lazy_begin(const uint32_t *area_blocks, uint32_t map_pages, const uint32_t *crc, uint64_t nlba,
		      uint64_t number);
void af_map_lazy_abort(void);
/* LBA `lba`'s segment in memory (loaded now if it was not). */
void af_map_need(uint32_t lba);
/* Every segment in memory. */
void af_map_load_all(void);
/* Idle loop: the segment a host request waits for, else the next one. */
void af_map_poll(void);
/* Only the segment a request waits for, if one does (1): for loops that wait on the core. */
int af_map_serve_fault(void);
/* af_ftl_start: the gate's bits and ftl.map_lazy, before the host comes on. */
void af_map_start_core(void);
/* af_ftl_start: the checkpointer's view (af_ckpt.shadow_ppa, af_ftl.capacity entries) of every loaded segment;
 * the segments loaded from now on go there too. */
void af_map_copy_shadow(uint32_t *shadow);

#endif
