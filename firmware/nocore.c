/* atomflash firmware: builds without the FTL core (the identify placeholder of
 * `soc/sim.py --no-nand`, or a board's NAND controller alone, `--core nand`).
 *
 * The FTL's files (ftlcore.c, pending.c, mapload.c, ckpt.c, anchor.c, wear.c,
 * ftl.c, ckpt_take.c, gc.c) compile to nothing there; what the layers above
 * them call in every build -- the boot path (mount.c), the idle loop
 * (main.c), the console's commands -- gets a no-op here, in one place: no
 * core, no checkpoint, no anchor, nothing to collect.  The boot still brings
 * the NAND up, reads the factory markers and recovers the map (flash.c,
 * recovery.c), and the commands that need the core say it is not there. */
#include <stdio.h>
#include <string.h>

#include "anchor.h"
#include "ckpt.h"
#include "ckpt_take.h"
#include "flash.h"
#include "ftl.h"
#include "ftlcore.h"
#include "gc.h"
#include "mapload.h"
#include "pending.h"

#ifndef AFCTRL_FTL

/* ftlcore.h */
int af_ftl_map(unsigned op, uint32_t lba, uint32_t value, uint32_t expected, uint32_t *old) { return -1; }
uint32_t af_ftl_valid_of(uint32_t g) { return 0; }

/* pending.h, mapload.h, ckpt.h, anchor.h: no checkpoint loads, no anchor is found */
void af_pend_fill(af_rec_checkpoint_t *ck) {}
void af_map_need(uint32_t lba) {}
void af_map_load_all(void) {}
int af_ckpt_load(uint32_t g, const af_ckpt_where_t *where) { return -1; }
void af_anchor_boot(void)
{
	memset(&af_anchor, 0, sizeof(af_anchor));
	af_anchor.power_cycles = 1; /* nothing keeps them: every boot is the first */
}
void af_anchor_where(af_ckpt_where_t *w) { memset(w, 0, sizeof(*w)); }
uint32_t af_anchor_apply_bad(void) { return 0; }
uint32_t af_anchor_usable_pages(void) { return 0; }

/* ftl.h, ckpt_take.h, gc.h */
int af_ftl_start(void) { return -1; }
void af_ftl_poll(void) {}
/* the console's `nand test` erased free block g */
void af_ftl_count_erase(uint32_t g)
{
	af_flash.blocks[g].erases++;
	af_flash.erased_since_boot++;
}
void af_ckpt_poll(void) {}
void af_gc_poll(void) {}
void af_gc_boot(void) {}

#endif /* AFCTRL_FTL */
