/* atomflash firmware: driver for the NAND controller window.
 *
 * The controller is boards/nand_bridge.py (NandBridge): the RTL
 * NandController behind a Wishbone window at AFNAND_BASE (mem.h), register
 * map AFNAND_REG_* / AFNAND_STATUS_* / AFNAND_CTRL_* (soc.h).  The CPU writes a
 * descriptor (af_nand_desc_t, atomflash_spec.h) into DESC and pushes it; the
 * controller answers every descriptor with one completion (af_nand_cpl_t) in
 * CPL, which the CPU pops.  Page data moves through each channel's page
 * buffer: channel c's slot s at AFNAND_REG_BUF + c * BUF_STRIDE + s * SLOT.
 *
 * Completions are collected into a software queue whenever the driver waits
 * (for DESC to be taken, or for one tag), so a caller may keep many
 * descriptors in flight and still issue a synchronous operation in between
 * (recovery does: OOB reads pipelined over every target, record pages read
 * synchronously from inside the scan).
 *
 * Geometry is read from the device: af_nand_bringup() resets every target,
 * reads its ID and parameter page (CRC checked, redundant copies tried), and
 * requires every target to report the same geometry.  Nothing about the flash
 * is compiled in; the controller's shape (channels, ways, slots, ECC, slot
 * size) comes from its GEOMETRY/SLOT registers.
 *
 * Builds without the controller (no AFNAND_BASE) get the same API; every call
 * fails with AF_NAND_ENODEV. */
#ifndef AF_NAND_H
#define AF_NAND_H

#include <stdint.h>

#include "fw.h"

/* Driver errors (negative; results >= 0 are AF_NANDRESULT_* of the completion). */
#define AF_NAND_ENODEV (-1)   /* no NAND controller in this build */
#define AF_NAND_ETIMEOUT (-2) /* no completion in time */
#define AF_NAND_EGEOMETRY (-3) /* parameter page missing, corrupt, or geometry the controller cannot serve */

/* Descriptors and completions are packed records; keep local copies word
 * aligned so the driver moves them as words. */
#define AF_NAND_ALIGNED __attribute__((aligned(4)))

/* Tags at or above this are the driver's own synchronous operations; callers
 * pipelining descriptors use tags below it.  Every tag is below
 * AF_NAND_TAG_LIMIT: the FTL core's NAND port mux keeps 14 bits of a
 * requester's tag (rtl/ftl/nandport.py, four requesters). */
#define AF_NAND_TAG_SYNC 0x2000u
#define AF_NAND_TAG_LIMIT 0x4000u

/* The ID bytes af_nand_bringup() keeps per target (READ ID address 00h). */
#define AF_NAND_ID_LEN 8

typedef struct {
	/* controller: the bridge's registers */
	uint32_t block_version;
	uint32_t channels, ways, slots, ecc;
	uint32_t slot_bytes, buf_stride;
	uint32_t fw_slot;          /* FW_SLOT: the slot synchronous operations use (the only one once the FTL runs) */
	uint32_t targets;          /* channels * ways */
	/* device: every target's parameter page (they must agree) */
	uint32_t page_data, page_spare, pages_per_block, blocks_per_lun, luns;
	uint32_t bits_per_cell, timing_modes, t_r_us, t_prog_us, t_bers_us, t_ccs_ns;
	uint32_t onfi_revision;
	uint32_t endurance;        /* rated program/erase cycles per block (parameter page; 0: not given) */
	char manufacturer[AF_ONFI_PARAM_MANUFACTURER_LEN + 1];
	char model[AF_ONFI_PARAM_MODEL_LEN + 1];
	uint8_t param_copy;        /* which copy of target 0's parameter page passed its CRC (0 = first) */
	int mode;                  /* ONFI timing mode in use (-1: not brought up) */
	/* page layout with ECC (atomflash.spec.nand_page_layout) */
	uint32_t oob_col;          /* spare user bytes: BBM bytes then the OOB record (one ECC codeword) */
	uint32_t oob_bytes;        /* AF_NAND_BBM_BYTES + AF_OOB_SIZE */
	uint32_t user_bytes;       /* page_data + oob_bytes: what a whole-page READ/PROGRAM moves */
	/* totals */
	uint32_t blocks;           /* targets * luns * blocks_per_lun */
	uint32_t pages;            /* blocks * pages_per_block */
	int up;                    /* af_nand_bringup() succeeded */
} af_nand_info_t;

extern af_nand_info_t af_nand;

/* Per-target identity from bring-up. */
typedef struct {
	uint8_t id[AF_NAND_ID_LEN];
	uint8_t onfi;              /* READ ID 20h returned "ONFI" */
	uint8_t param_ok;          /* a parameter page copy passed its CRC */
	uint8_t status;            /* status byte of the RESET completion */
} af_nand_target_t;

/* --- controller --------------------------------------------------------------- */
int af_nand_present(void);          /* the bridge answers with AFNAND_BLOCK_ID */
int af_nand_init(void);             /* read the controller registers into af_nand; 0 or AF_NAND_ENODEV */
const af_nand_target_t *af_nand_target(unsigned t); /* t = channel * ways + way; NULL past the last */

/* Descriptors and completions.  af_nand_submit() sends d as it is (the caller
 * picks the tag); it waits while the previous descriptor has not been taken,
 * collecting completions meanwhile.  af_nand_poll() returns 1 and the oldest
 * collected completion, or 0.  af_nand_wait() waits for tag's completion
 * (others stay queued for af_nand_poll()). */
int af_nand_submit(const af_nand_desc_t *d);
int af_nand_poll(af_nand_cpl_t *out);
int af_nand_wait(uint16_t tag, af_nand_cpl_t *out);
/* Submit d with a driver tag and wait: the completion's result (>= 0) or < 0. */
int af_nand_exec(af_nand_desc_t *d, af_nand_cpl_t *out);
uint32_t af_nand_inflight(void);    /* submitted, completion not yet returned */

/* Page buffers: byte offsets in the slot, any alignment. */
void af_nand_buf_read(unsigned ch, unsigned slot, unsigned off, void *dst, unsigned len);
void af_nand_buf_write(unsigned ch, unsigned slot, unsigned off, const void *src, unsigned len);
unsigned af_nand_sync_slot(void);   /* the slot synchronous operations use (FW_SLOT) */
/* The slot's words in the window (uncached, one bus read each): for callers that
 * use data where it lies instead of copying it out first. */
const volatile uint32_t *af_nand_buf_words(unsigned ch, unsigned slot);

/* --- physical page addresses (spec PPA: channel, way, lun, block, page) -------- */
uint32_t af_nand_ppa(unsigned ch, unsigned way, unsigned lun, unsigned block, unsigned page);
/* Global block number: ((channel * ways + way) * luns + lun) * blocks_per_lun + block. */
uint32_t af_nand_block_of(uint32_t ppa);
uint32_t af_nand_block_ppa(uint32_t gblock);  /* page 0 of global block gblock */
void af_nand_print_ppa(uint32_t ppa);         /* "ch C way W lun L block B page P" */

/* --- operations (synchronous; the slot is af_nand_sync_slot()) ------------------
 * Each returns the completion's result (AF_NANDRESULT_*) or < 0; cpl may be NULL. */
int af_nand_reset(unsigned ch, unsigned way, af_nand_cpl_t *cpl);
int af_nand_read_status(unsigned ch, unsigned way, af_nand_cpl_t *cpl);
int af_nand_read_id(unsigned ch, unsigned way, unsigned addr, uint8_t *buf, unsigned len);
/* A parameter page copy whose CRC checks (256 bytes into buf); returns 0..copies-1
 * = the copy used, or AF_NAND_EGEOMETRY. */
int af_nand_read_param(unsigned ch, unsigned way, uint8_t *buf);
/* SET FEATURES timing mode on every target, then the controller's timing registers. */
int af_nand_set_timing_mode(int mode);
/* READ len bytes at column col of page ppa into buf (buf may be NULL: data
 * stays in the sync slot).  flags: AF_NAND_DESC_FLAGS_RAW_MASK for no ECC.
 * With ECC, col/len must be codeword-aligned (data codewords or the OOB
 * codeword): whole page = (0, af_nand.user_bytes), OOB only =
 * (af_nand.oob_col, af_nand.oob_bytes). */
int af_nand_read(uint32_t ppa, unsigned col, unsigned len, void *buf, unsigned flags, af_nand_cpl_t *cpl);
int af_nand_program(uint32_t ppa, unsigned col, const void *buf, unsigned len, unsigned flags, af_nand_cpl_t *cpl);
int af_nand_erase(uint32_t ppa, af_nand_cpl_t *cpl);
/* ERASE the blocks of n pages at once (each target erases its own while the others do): result[i] is
 * ppa[i]'s AF_NANDRESULT_*, or a negative AF_NAND_E* when it was not submitted or never completed. */
void af_nand_erase_many(const uint32_t *ppa, int *result, unsigned n);

/* RESET every target (cpls: one per target, may be NULL), then the timing
 * mode in use again (RESET returns a target to mode 0).  The worst result. */
int af_nand_reset_all(af_nand_cpl_t *cpls);

/* Bring-up: init, RESET + READ ID + parameter page on every target, geometry
 * checks against the controller, fastest common timing mode (<= max_mode).
 * 0 or < 0 (a message has been printed). */
int af_nand_bringup(int max_mode);

/* Fill d with the common fields (opcode, channel, target, lun, block, page). */
void af_nand_desc_init(af_nand_desc_t *d, unsigned opcode, uint32_t ppa);

const char *af_nand_result_name(int r);

#endif
