/* atomflash firmware: taking a checkpoint (the format, and loading one at boot: ckpt.h).
 *
 * Taking one (af_ckpt_take) while the host keeps writing:
 *   1. a snapshot (GET_LOG SNAPSHOT through the firmware's queue pair; pending.h):
 *      once every command before it is published, S = the log writer's next
 *      seq and the transactions open and appends live then, with where their
 *      staged pages are, which the checkpoint records (format 6) so recovery
 *      can prove a commit or remap after S (trap 8); blocks closed since S are
 *      listed with the open ones;
 *   2. FLUSH through the firmware's queue pair (the map cache's write-backs);
 *   3. FLUSH the map cache: the L2P table in memory holds all of them;
 *   4. read the table; an entry that changed since the last checkpoint gets its
 *      vseq from its page's OOB (so the cost is the writes since, plus a scan
 *      of the table in memory).  Entries may already hold commits from S on:
 *      recovery replays those in order over the checkpoint, so that is harmless;
 *   5. erase the other area and program header + map pages (OOB kind
 *      CHECKPOINT, vseq = the number, seq = S); torn -> the other area wins.
 *
 * The areas' blocks come from the FTL's free-block pool (ftl.c): taken at the
 * first checkpoint, swapped for a less-worn one when worn (wear.h's spread),
 * replaced when an erase or program fails; an anchor record names them before
 * the first page goes into a new one (anchor.h). */
#ifndef AF_CKPT_TAKE_H
#define AF_CKPT_TAKE_H

#include <stdint.h>

/* Take a checkpoint now.  0 or -1 (printed). */
int af_ckpt_take(void);
/* The floor a checkpoint taken now would have: the log's next seq (format 6 records what is open). */
uint64_t af_ckpt_next_floor(void);
/* From the idle loop: take one when `interval` pages were written since the floor. */
void af_ckpt_poll(void);

#endif
