/* atomflash firmware: the NVMe controller's admin path (nvme.c), through the controller's window
 * (spec.NVME_FW_REGS; rtl/nvme/fwwindow.py).
 *
 * Present only when the SoC has an NVMe controller: its build defines AFCTRL_NVME and
 * AFCTRL_NVME_OFFSET (the window's offset in the controller block, as AFCTRL_FTL_OFFSET is the FTL
 * core's), and AF_NVME follows.  The host build of tb/firmware_nvme defines AF_NVME_HOST instead and
 * supplies the three HAL functions below itself.
 *
 * What the integration provides:
 *   - the HAL: af_nvme_hal_read/af_nvme_hal_write (the window, byte offsets AF_NVMEFW_*) and
 *     af_nvme_hal_publish (the scratch page is in SoC memory for the data mover to read);
 *   - af_nvme_config_t: the drive's IDENTIFY record, a page of SoC memory, the controller's build;
 *   - af_nvme_hooks_t: the FTL's part (flush and checkpoint, blocks in use, the vendor log pages);
 *   - a call of af_nvme_poll() from the main loop, after af_nvme_start(). */
#ifndef AF_NVME_H
#define AF_NVME_H

#include <stdint.h>

#ifdef AF_NVME_HOST
#include "atomflash_spec.h"
#else
#include "fw.h"
#endif

#if defined(AF_NVME_HOST) || defined(AFCTRL_NVME)
#define AF_NVME 1
#endif

#ifdef AF_NVME

#ifdef AF_NVME_HOST
uint32_t af_nvme_hal_read(uint32_t offset);
void af_nvme_hal_write(uint32_t offset, uint32_t value);
void af_nvme_hal_publish(uint32_t soc_addr, const void *data, uint32_t bytes);
#else
static inline uint32_t af_nvme_hal_read(uint32_t offset)
{
	return afctrl_read(AFCTRL_NVME_OFFSET + offset);
}
static inline void af_nvme_hal_write(uint32_t offset, uint32_t value)
{
	afctrl_write(AFCTRL_NVME_OFFSET + offset, value);
}
/* The data cache writes through: the page is in memory once the stores are out. */
static inline void af_nvme_hal_publish(uint32_t soc_addr, const void *data, uint32_t bytes)
{
	__sync_synchronize();
}
#endif

/* The FTL's part of the admin path (on the SoC: ftlcore.c's af_ftl_io FLUSH, ckpt_take.c's
 * af_ckpt_take, GET_LOG through af_ftl_io).  A NULL hook is a duty the drive does not have. */
typedef struct {
	/* Make every acknowledged write durable; checkpoint: write a checkpoint too (a shutdown). */
	void (*flush)(int checkpoint);
	/* Blocks allocated in the namespace (Identify Namespace NUSE). */
	uint64_t (*blocks_in_use)(void);
	/* SMART's Percentage Used: the life the flash has used, in percent (may pass 100), from its wear. */
	uint32_t (*percentage_used)(void);
	/* Log page lid (AF_NVMELOGPAGE_ATOMFLASH_*) into page (bytes long): its length, or -1 for none. */
	int32_t (*vendor_log)(uint32_t lid, void *page, uint32_t bytes);
} af_nvme_hooks_t;

#define AF_NVME_SCRATCH_BYTES (1u << AF_NVME_PAGE_SHIFT) /* the page every admin data structure is built in */
#define AF_NVME_MAX_IO_QUEUES 31u                        /* queue bitmaps are 32 bits, the admin queue's included */

typedef struct {
	const af_identify_t *identify; /* the drive's limits, as its IDENTIFY record gives them */
	void *scratch;                 /* AF_NVME_SCRATCH_BYTES of SoC memory, 4-byte aligned (the CPU's view) */
	uint32_t scratch_addr;         /* the same page as the data mover addresses it */
	uint32_t staging_base;         /* where the I/O commands' staging areas start */
	uint32_t io_queues, mqes;      /* as the controller was built (1..AF_NVME_MAX_IO_QUEUES; CAP.MQES) */
	int volatile_cache;            /* the drive has a volatile write cache */
	const char *serial;            /* Identify's serial number */
	uint64_t power_cycles, unsafe_shutdowns; /* SMART counters kept across power cycles by the caller */
	af_nvme_hooks_t hooks;
} af_nvme_config_t;

/* One entry of the error information log, as NVME_ERROR_LOG will hold it. */
typedef struct {
	uint64_t error_count, lba;
	uint32_t nsid;
	uint16_t sqid, cid, status;
} af_nvme_error_t;

/* An asynchronous event waiting for an Asynchronous Event Request. */
typedef struct {
	uint8_t type, info, lid;
} af_nvme_event_t;

#define AF_NVME_EVENTS 8u /* distinct events pending at most (later ones are dropped, counted) */

typedef struct {
	int started;
	af_nvme_config_t cfg;
	uint32_t cc;                 /* CC as last acted on */
	uint32_t cqs, sqs;           /* bit q: queue q exists */
	uint8_t sq_cq[AF_NVME_MAX_IO_QUEUES + 1]; /* an SQ's completion queue */
	uint32_t arbitration, volatile_write_cache, interrupt_coalescing, async_event_config; /* features */
	af_nvme_error_t errors[AF_NVME_IDENT_ERROR_LOG_ENTRIES]; /* a ring, newest at errors_newest */
	uint32_t errors_newest, errors_kept;
	uint64_t error_count;        /* errors over the life (SMART error_log_entries) */
	uint16_t aers[AF_NVME_IDENT_AERL + 1]; /* outstanding Asynchronous Event Requests' CIDs, oldest first */
	uint32_t aers_n;
	af_nvme_event_t events[AF_NVME_EVENTS];
	uint32_t events_n, events_dropped;
	uint32_t masked;             /* bit t: events of type t wait for the host to read their log page */
	uint64_t media_errors;
	uint32_t admin_commands;     /* taken from the window */
	uint32_t timeouts;           /* waits on the window that gave up (the gateware never answered) */
} af_nvme_t;

extern af_nvme_t af_nvme;

/* Power on: check the window's identity, hand it the staging base and the features.  0, or -1 when the
 * window is not the NVMe controller's. */
int af_nvme_start(const af_nvme_config_t *cfg);
/* One pass over what waits: a CC write, a failed I/O command, an ignored doorbell, one admin command.
 * Returns whether it did anything. */
int af_nvme_poll(void);
/* spec.nvme_status_of: SCT << 8 | SC of an atomflash Status (a command that did not read the medium). */
uint32_t af_nvme_status_of(uint32_t status);

#endif /* AF_NVME */
#endif
