/* atomflash firmware: mounting the flash at boot (mount.c), after the console is up:
 *
 *   NAND bring-up and the tables (flash.c)
 *   -> the anchor (anchor.c), then the checkpoint its record names and page 0
 *      of the blocks written since; without a record, page 0 of every block
 *      (checkpoint headers, each block's first seq) and the newest intact
 *      checkpoint (ckpt.c; its map lazily: mapload.c)
 *   -> bad blocks: the checkpoint's table, or else the factory markers; the
 *      anchor's grown bad blocks
 *   -> recovery (recovery.c, through flash.c): the OOB record of every page of
 *      the blocks written since the checkpoint's floor (every good block
 *      without one); af_rec_finish over the checkpoint's map and the pending
 *      bindings it recorded (pending.c)
 *   -> boot report.
 *
 * Above the checkpoints and the anchor, below the FTL: what the boot leaves
 * (af_flash, af_ckpt, af_anchor) is what af_ftl_start hands to the core. */
#ifndef AF_MOUNT_H
#define AF_MOUNT_H

/* The boot path above; prints the boot report.  0, or < 0 when NAND bring-up or recovery failed. */
int af_mount(void);

#endif
