/* atomflash firmware: the FTL core's registers and the firmware's queue pair (see ftlcore.h). */
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "console.h"
#include "ftlcore.h"
#include "nand.h"

af_ftl_t af_ftl;
af_ftl_hooks_t af_ftl_hooks;

#ifdef AFCTRL_FTL

#define SPIN_LIMIT 2000000u
#define FW_QUEUE_ENTRIES 8u

int af_ftl_probe(void)
{
	memset(&af_ftl, 0, sizeof(af_ftl));
	if (ftl_rd(AF_FTL_ID) != AF_FTL_REGS_ID)
		return 0;
	uint32_t g = ftl_rd(AF_FTL_GEOMETRY);
	af_ftl.channels = ftl_field(g, AF_FTL_GEOMETRY_CHANNELS, AF_FTL_GEOMETRY_CHANNELS_SHIFT);
	af_ftl.ways = ftl_field(g, AF_FTL_GEOMETRY_WAYS, AF_FTL_GEOMETRY_WAYS_SHIFT);
	af_ftl.queue_pairs = ftl_field(g, AF_FTL_GEOMETRY_QUEUE_PAIRS, AF_FTL_GEOMETRY_QUEUE_PAIRS_SHIFT);
	af_ftl.fw_slot = ftl_field(g, AF_FTL_GEOMETRY_FW_SLOT, AF_FTL_GEOMETRY_FW_SLOT_SHIFT);
	af_ftl.scratch_pages = ftl_rd(AF_FTL_SCRATCH_PAGES);
	af_ftl.free_depth = ftl_rd(AF_FTL_FREE_DEPTH);
	af_ftl.dies = af_ftl.channels * af_ftl.ways;
	af_ftl.present = af_ftl.dies > 0 && af_ftl.dies <= AF_FTL_MAX_DIES;
	return af_ftl.present;
}

int af_ftl_wait_clear(uint32_t status_bits)
{
	for (unsigned spin = 0; spin < SPIN_LIMIT; spin++) {
		if (!(ftl_rd(AF_FTL_STATUS) & status_bits))
			return 0;
		if ((spin & 255) == 255 && af_ftl_hooks.map_fault)
			af_ftl_hooks.map_fault(); /* what we wait for may wait behind a request for a map segment */
	}
	return -1;
}

int af_ftl_map(unsigned op, uint32_t lba, uint32_t value, uint32_t expected, uint32_t *old)
{
	if (op != AF_MAPFWOP_FLUSH && op != AF_MAPFWOP_INVALIDATE && af_ftl_hooks.map_need)
		af_ftl_hooks.map_need(lba); /* a segment not loaded yet would hold the request until someone loads it */
	if (af_ftl_wait_clear(AF_FTL_STATUS_MAP_BUSY) < 0)
		return -1;
	ftl_wr(AF_FTL_MAP_OP, op);
	ftl_wr(AF_FTL_MAP_LBA, lba);
	ftl_wr(AF_FTL_MAP_VALUE, value);
	ftl_wr(AF_FTL_MAP_EXPECTED, expected);
	ftl_wr(AF_FTL_CTRL, AF_FTL_CTRL_MAP_GO);
	for (unsigned spin = 0; spin < SPIN_LIMIT; spin++) {
		if (ftl_rd(AF_FTL_STATUS) & AF_FTL_STATUS_MAP_DONE) {
			if (old)
				*old = ftl_rd(AF_FTL_MAP_OLD);
			return (int)ftl_rd(AF_FTL_MAP_RESULT);
		}
		if ((spin & 255) == 255 && af_ftl_hooks.map_fault)
			af_ftl_hooks.map_fault(); /* the port may be held by a host lookup waiting for its segment */
	}
	return -1;
}

uint32_t af_ftl_die_of(uint32_t ppa)
{
	return AF_PPA_PPA_WAY_GET(ppa) * af_ftl.channels + AF_PPA_PPA_CHANNEL_GET(ppa);
}

uint32_t af_ftl_valid_of(uint32_t g)
{
	uint32_t ppa = af_nand_block_ppa(g);
	return af_ftl.bt[(af_ftl_die_of(ppa) << af_ftl.block_shift) | AF_PPA_PPA_BLOCK_GET(ppa)];
}

uint32_t af_ftl_gblock(uint32_t die, uint32_t block)
{
	uint32_t ch = die % af_ftl.channels, way = die / af_ftl.channels;
	return ((ch * af_nand.ways + way) * af_nand.luns) * af_nand.blocks_per_lun + block;
}

uint64_t af_ftl_seq_next(void)
{
	for (;;) {
		uint32_t hi = ftl_rd(AF_FTL_SEQ_NEXT_HI), lo = ftl_rd(AF_FTL_SEQ_NEXT_LO);
		if (ftl_rd(AF_FTL_SEQ_NEXT_HI) == hi)
			return (uint64_t)hi << 32 | lo;
	}
}

uint64_t af_ftl_tx_floor(void)
{
	/* appends: the scanner's value is only sure to cover what was taken before the pass before the last began */
	uint32_t pass = ftl_rd(AF_FTL_FLOOR_PASSES);
	while (ftl_rd(AF_FTL_FLOOR_PASSES) - pass < 2)
		;
	for (;;) {
		uint32_t hi = ftl_rd(AF_FTL_TX_FLOOR_HI), lo = ftl_rd(AF_FTL_TX_FLOOR_LO);
		if (ftl_rd(AF_FTL_TX_FLOOR_HI) == hi)
			return (uint64_t)hi << 32 | lo;
	}
}

void af_ftl_host_ctrl(void)
{
	int held = af_ftl.gc_active || af_ftl.host_held;
	if (!held) {
		af_ftl.host_admitted = 1;
		af_ftl.host_drained = 0;
	}
	ftl_wr(AF_FTL_HOST_ENABLE, AF_FTL_HOST_ENABLE_ENABLE | (held ? AF_FTL_HOST_ENABLE_HOLD : 0) |
					   (af_ftl.no_space ? AF_FTL_HOST_ENABLE_NO_SPACE : 0) |
					   (af_ftl.no_blocks ? AF_FTL_HOST_ENABLE_NO_BLOCKS : 0));
}

uint32_t af_ftl_in_core(void)
{
	uint32_t n = 0;
	for (uint32_t q = 0; q + 1 < af_ftl.queue_pairs; q++) {
		uint32_t size = hostq_rd(AF_HOSTQ_SIZE(q));
		if (size)
			n += (hostq_rd(AF_HOSTQ_SQ_HEAD(q)) - hostq_rd(AF_HOSTQ_CQ_TAIL(q))) & (size - 1);
	}
	return n + af_ftl_fw_in_core();
}

uint32_t af_ftl_fw_in_core(void)
{
	return (af_ftl.sq_tail - hostq_rd(AF_HOSTQ_CQ_TAIL(af_ftl.qid))) & (af_ftl.qsize - 1);
}

/* --- the firmware's queue pair ---------------------------------------------------------- */

int af_ftl_queue_setup(void)
{
	uint32_t max = hostq_rd(AF_HOSTQ_MAX_ENTRIES);
	af_ftl.qid = af_ftl.queue_pairs - 1;
	af_ftl.qsize = max < FW_QUEUE_ENTRIES ? max : FW_QUEUE_ENTRIES;
	af_ftl.sq = af_ram_alloc(sizeof(af_cmd_t) * af_ftl.qsize, 64);
	af_ftl.cq = af_ram_alloc(sizeof(af_cpl_t) * af_ftl.qsize, 16);
	af_ftl.io_buf = af_ram_alloc(af_nand.page_data * AF_FTL_IO_PAGES, 64);
	if (!af_ftl.sq || !af_ftl.cq || !af_ftl.io_buf)
		return -1;
	memset(af_ftl.sq, 0, sizeof(af_cmd_t) * af_ftl.qsize);
	memset(af_ftl.cq, 0, sizeof(af_cpl_t) * af_ftl.qsize);
	hostq_wr(AF_HOSTQ_SQ_BASE(af_ftl.qid), (uint32_t)(uintptr_t)af_ftl.sq);
	hostq_wr(AF_HOSTQ_CQ_BASE(af_ftl.qid), (uint32_t)(uintptr_t)af_ftl.cq);
	hostq_wr(AF_HOSTQ_SIZE(af_ftl.qid), af_ftl.qsize);  /* resets the pair's indices */
	af_ftl.sq_tail = af_ftl.cq_head = 0;
	af_ftl.phase = 1;
	hostq_wr(AF_HOSTQ_CTRL, hostq_rd(AF_HOSTQ_CTRL) | AF_HOSTQ_CTRL_ENABLE);
	if (hostq_rd(AF_HOSTQ_STATUS) & AF_HOSTQ_STATUS_CONFIG_ERROR)
		return -1;
	return 0;
}

int af_ftl_submit(af_cmd_t *cmd)
{
	if (!af_ftl.running)
		return -1;
	cmd->cid = af_ftl.next_cid++;
	cmd->nsid = 1;
	af_ftl.sq[af_ftl.sq_tail] = *cmd;
	af_ftl.sq_tail = (af_ftl.sq_tail + 1) % af_ftl.qsize;
	hostq_wr(AF_HOSTQ_SQ_TAIL(af_ftl.qid), af_ftl.sq_tail);
	return 0;
}

int af_ftl_reap(unsigned opcode, uint16_t *cid, uint64_t *result)
{
	for (unsigned spin = 0; spin < 50u * SPIN_LIMIT; spin++) {
		if ((spin & 63) == 0 && af_ftl_hooks.upkeep)
			af_ftl_hooks.upkeep(); /* a long write may need fresh blocks; a starved core, GC's reserve */
		if (spin == SPIN_LIMIT)
			printf("warning: ftl: opcode 0x%02x waits long: core status 0x%02lx, %lu free blocks, hold %lu\n",
			       opcode, (unsigned long)ftl_rd(AF_FTL_STATUS), (unsigned long)af_ftl.free_blocks,
			       (unsigned long)af_ftl.gc_active);
		af_dcache_invalidate(); /* the completion is written behind the cache */
		volatile af_cpl_t *c = &af_ftl.cq[af_ftl.cq_head];
		uint16_t sf = c->sf;
		if (AF_CPL_SF_PHASE_GET(sf) != af_ftl.phase)
			continue;
		if (result)
			*result = c->result;
		*cid = c->cid;
		af_ftl.cq_head = (af_ftl.cq_head + 1) % af_ftl.qsize;
		if (af_ftl.cq_head == 0)
			af_ftl.phase ^= 1;
		hostq_wr(AF_HOSTQ_CQ_HEAD(af_ftl.qid), af_ftl.cq_head);
		af_ftl.fw_waiting = 0;
		return (int)AF_CPL_SF_STATUS_GET(sf);
	}
	af_ftl.fw_waiting = 0;
	return -1;
}

int af_ftl_wait(const af_cmd_t *cmd, uint64_t *result)
{
	for (;;) {
		uint16_t cid;
		int st = af_ftl_reap(cmd->opcode, &cid, result);
		if (st < 0 || cid == cmd->cid)
			return st;
		/* the answer to an earlier command whose wait gave up: ours comes after it */
		af_ftl.late_completions++;
	}
}

int af_ftl_io(af_cmd_t *cmd, uint64_t *result)
{
	if (af_ftl_submit(cmd) < 0)
		return -1;
	return af_ftl_wait(cmd, result);
}

void af_ftl_print(const char *prefix)
{
	if (!af_ftl.present) {
		printf("%sno FTL core answered\n", prefix);
		return;
	}
	uint32_t st = ftl_rd(AF_FTL_STATUS);
	uint32_t hits = ftl_rd(AF_FTL_MAP_HITS), misses = ftl_rd(AF_FTL_MAP_MISSES);
	printf("%score %lu x %lu dies, %lu queue pairs (the firmware's: %lu), fw slot %lu, %s\n", prefix,
	       (unsigned long)af_ftl.channels, (unsigned long)af_ftl.ways, (unsigned long)af_ftl.queue_pairs,
	       (unsigned long)(af_ftl.queue_pairs - 1), (unsigned long)af_ftl.fw_slot,
	       af_ftl.running ? "running" : "not started");
	printf("%scapacity ", prefix);
	af_print_u64(af_ftl.capacity);
	printf(" LBAs; blocks: %lu free, %lu handed to the core, %lu came back full%s\n",
	       (unsigned long)af_ftl.free_blocks, (unsigned long)af_ftl.pushed, (unsigned long)af_ftl.closed,
	       (st & AF_FTL_STATUS_STARVED) ? "; STARVED: no erased block left" : "");
	printf("%smap cache: %lu hits, %lu misses", prefix, (unsigned long)hits, (unsigned long)misses);
	if (hits + misses)
		printf(" (%lu%% hits)", (unsigned long)((uint64_t)hits * 100 / (hits + misses)));
	printf("\n");
	if (af_ftl.cache_pages)
		printf("%swrite cache: %lu pages at 0x%08lx: %lu in, %lu coalesced, %lu destaged (%lu full stripes), %lu dirty\n",
		       prefix, (unsigned long)af_ftl.cache_pages, (unsigned long)(uintptr_t)af_ftl.cache,
		       (unsigned long)ftl_rd(AF_FTL_CACHE_IN), (unsigned long)ftl_rd(AF_FTL_CACHE_COALESCED),
		       (unsigned long)ftl_rd(AF_FTL_CACHE_DESTAGED), (unsigned long)ftl_rd(AF_FTL_CACHE_STRIPES),
		       (unsigned long)ftl_rd(AF_FTL_CACHE_DIRTY));
	else
		printf("%swrite cache: none in this build (soc/sim.py --cache-pages)\n", prefix);
}

#endif /* AFCTRL_FTL */
