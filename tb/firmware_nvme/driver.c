/* Host build of firmware/nvme.c (tb/firmware_nvme): a shared library for ctypes.
 *
 * The HAL nvme.h asks of a host build (the window, publishing the scratch page) and the FTL's hooks
 * are function pointers the Python side (cnvme.py) hands over; afh_run is the firmware's main loop,
 * polling until the idle callback says the bench is done.  The scratch page lives here; publishing it
 * copies it into the simulated SoC memory at the address the data mover reads. */
#include <stdint.h>
#include <string.h>

#include "nvme.h"

typedef uint32_t (*afh_read_fn)(uint32_t offset);
typedef void (*afh_write_fn)(uint32_t offset, uint32_t value);
typedef void (*afh_publish_fn)(uint32_t soc_addr, const void *data, uint32_t bytes);
typedef int (*afh_idle_fn)(void);

static afh_read_fn bus_read;
static afh_write_fn bus_write;
static afh_publish_fn bus_publish;
static afh_idle_fn bus_idle;

static uint32_t scratch[AF_NVME_SCRATCH_BYTES / 4];
static af_identify_t identify;
static char serial[21];

uint32_t af_nvme_hal_read(uint32_t offset)
{
	return bus_read(offset);
}

void af_nvme_hal_write(uint32_t offset, uint32_t value)
{
	bus_write(offset, value);
}

void af_nvme_hal_publish(uint32_t soc_addr, const void *data, uint32_t bytes)
{
	bus_publish(soc_addr, data, bytes);
}

void afh_bind(afh_read_fn read, afh_write_fn write, afh_publish_fn publish, afh_idle_fn idle)
{
	bus_read = read;
	bus_write = write;
	bus_publish = publish;
	bus_idle = idle;
}

/* identify_record: spec.IDENTIFY packed; the hooks may be NULL. */
int afh_start(const void *identify_record, uint32_t scratch_addr, uint32_t staging_base, uint32_t io_queues,
	      uint32_t mqes, int volatile_cache, const char *serial_number, void (*flush)(int),
	      uint64_t (*blocks_in_use)(void), int32_t (*vendor_log)(uint32_t, void *, uint32_t),
	      uint32_t (*percentage_used)(void))
{
	memcpy(&identify, identify_record, sizeof(identify));
	strncpy(serial, serial_number, sizeof(serial) - 1);
	af_nvme_config_t cfg = {
		.identify = &identify, .scratch = scratch, .scratch_addr = scratch_addr, .staging_base = staging_base,
		.io_queues = io_queues, .mqes = mqes, .volatile_cache = volatile_cache, .serial = serial,
		.power_cycles = 1, .unsafe_shutdowns = 0,
		.hooks = {.flush = flush, .blocks_in_use = blocks_in_use, .vendor_log = vendor_log,
			  .percentage_used = percentage_used},
	};
	return af_nvme_start(&cfg);
}

/* The main loop: poll, and let time pass when there was nothing to do, until idle returns 0. */
void afh_run(void)
{
	for (;;)
		if (!af_nvme_poll() && !bus_idle())
			return;
}

uint64_t afh_error_count(void)
{
	return af_nvme.error_count;
}

uint32_t afh_timeouts(void)
{
	return af_nvme.timeouts;
}

uint32_t afh_admin_commands(void)
{
	return af_nvme.admin_commands;
}

uint64_t afh_media_errors(void)
{
	return af_nvme.media_errors;
}
