/* atomflash firmware: the pending bindings a checkpoint records (format 6, trap 8).
 *
 * A transaction's staged pages and an append's pages are bound only in the
 * core's pending-bindings table until their commit point (a COMMIT record, a
 * final page, a REMAP record).  A checkpoint whose floor S lies above their
 * first pages must tell recovery about them, or a commit after S could not be
 * proven (its older pages are not scanned).  Before format 6 the floor was held
 * at the first page of the oldest open transaction or live append instead, and
 * one left open stopped every erase: GC could collect nothing written after it
 * and the drive ran out of space with almost nothing stored.
 *
 * Now a checkpoint first asks the core for a snapshot (GET_LOG page SNAPSHOT
 * through the firmware's queue pair: the core answers once every command
 * before it is published, so nothing is in flight and the tables and the log's
 * next seq S agree).  S is the floor.  Every transaction open and every append
 * live at S goes into the checkpoint's pending pages as CKPT_PEND records:
 *   TX (first vseq, pages programmed), then a LIVE record per staged LBA
 *   (lba, vseq read from the page's OOB, ppa);
 *   APPEND (first vseq, blocks), then an APPEND_PAGE record per page.
 * At boot they become af_rec_checkpoint_t's tx/live/app lists, and recovery
 * proves a later commit or remap from them (recovery.c, atomflash.model.recover).
 * The ppa is where the version was at S; GC may move it later (the copy keeps
 * the vseq and is scanned, since it was written after S), so recovery looks for
 * a copy first and falls back to the ppa. */
#ifndef AF_PENDING_H
#define AF_PENDING_H

#include <stdint.h>

#include "fw.h"
#include "recovery.h"

typedef struct {
	af_ckpt_pend_t *rec;        /* the records: the last snapshot's, or the loaded checkpoint's */
	uint32_t n, max;            /* records held, room */
	uint32_t tx, appends;       /* of them: TX and APPEND records */
	uint32_t oob_reads;         /* OOB reads for the staged pages' versions (since boot) */
	uint32_t snapshots;         /* snapshots taken since boot */
	/* boot: the loaded checkpoint's lists, in af_rec_checkpoint_t's shape */
	af_rec_pending_tx_t *ck_tx;
	af_rec_live_t *ck_live;
	af_rec_pending_append_t *ck_app;
	uint32_t *ck_app_ppa;
	uint32_t ck_ntx, ck_nlive, ck_napp, ck_napp_ppa;
} af_pend_t;

extern af_pend_t af_pend;

/* Pages of CKPT_PEND records a checkpoint may need at most (the core's tables full). */
uint32_t af_pend_max_pages(void);
/* The snapshot: *floor = the log's next seq at it, records built.  0, or -1 with *why set. */
int af_pend_snapshot(uint64_t *floor, const char **why);
/* Pages the records take, and page p of them. */
uint32_t af_pend_pages(void);
void af_pend_page(uint32_t p, uint8_t *page);
/* Boot: page p of a checkpoint's pending pages arrives (words in the page buffer); once all have and
 * the payload CRC checked, af_pend_parse lays them out as recovery's lists (0, or -1: malformed), and
 * af_pend_fill hands those to af_rec_finish. */
int af_pend_begin_load(uint32_t pages);
void af_pend_take_page(uint32_t p, const volatile uint32_t *w);
int af_pend_parse(void);
void af_pend_fill(af_rec_checkpoint_t *ck);

#endif
