/* atomflash firmware: wear levelling.
 *
 * Every block's erase count lives in af_flash.blocks[g].erases: counted as
 * GC, the checkpointer and the pool erase, and saved in every checkpoint's
 * wear pages (spec.CKPT_HDR), so it survives power cycles (the erases after
 * the newest checkpoint are lost with power: a count is a lower bound).
 *
 * Dynamic levelling: a die's next block is its least-worn erased one
 * (af_policy_least_worn, policy.c, from ftl.c's pool), so hot data rotates through the
 * least-worn free blocks instead of a stack's top few.
 *
 * Static levelling: blocks holding cold data are never GC victims (they hold
 * no garbage), so their counts stay while the rest wear.  When a data block is
 * more than `spread` erases below the most worn good block, the coldest such
 * block (af_wear_cold_block) is relocated through GC's path (gc.c: the
 * relocation hook, the checkpoint floor, the read fence; GC asks once it has
 * done its own part) and erased; dynamic levelling then hands it out first,
 * so it takes hot writes.  That bounds max - min of the data
 * blocks' counts near `spread` (tb/soc/test_soc_wear.py measures it on the
 * models' own erase counters).
 *
 * Checkpoint areas: before a checkpoint erases its area's block, a block
 * `spread` or more erases past the least-worn erased one is swapped for it
 * (af_ftl_pool_rotate; the old block goes to the pool, erased before use).
 * The previous header's area list then names a block that may be reused:
 * the boot keeps an area block only if its page 0 is erased or a
 * checkpoint page (ckpt.c, af_ckpt_load), so a fallback to an older
 * checkpoint never takes a data block for an area.  `wear` shows the
 * areas' counts. */
#include <stdio.h>
#include <string.h>

#include "ckpt.h"
#include "console.h"
#include "flash.h"
#include "ftlcore.h"
#include "nand.h"
#include "wear.h"

af_wear_t af_wear = { .spread = AF_WEAR_DEFAULT_SPREAD };

#ifdef AFCTRL_FTL

/* A block whose count takes part: good, LUN 0 (the FTL's), not retired, not a
 * checkpoint area's (those rotate at checkpoint time, ckpt.c). */
static int counted(uint32_t g)
{
	return !af_flash.blocks[g].flags && AF_PPA_PPA_LUN_GET(af_nand_block_ppa(g)) == 0 &&
	       af_flash.blocks[g].state != AF_BSTATE_CKPT;
}

uint32_t af_wear_cold_block(void)
{
	if (!af_ftl.running || af_wear.static_off || !af_wear.spread)
		return AF_WEAR_NONE;
	/* counts only change with erases: look again only after one */
	static uint32_t seen = UINT32_MAX;
	uint32_t erases = af_ftl.erased + af_ckpt.taken;
	if (erases == seen)
		return AF_WEAR_NONE;
	seen = erases;
	uint32_t most = 0, victim = 0, least = UINT32_MAX;
	for (uint32_t g = 0; g < af_flash.nblocks; g++) {
		if (!counted(g))
			continue;
		const af_block_t *b = &af_flash.blocks[g];
		if (b->erases > most)
			most = b->erases;
		if (b->state == AF_BSTATE_DATA && b->written > 0 && b->erases < least) {
			least = b->erases;
			victim = g;
		}
	}
	if (af_ftl.trace)
		printf("wear: most worn %lu erases, coldest data block %lu with %lu\n", (unsigned long)most,
		       (unsigned long)victim, (unsigned long)least);
	if (least == UINT32_MAX || most - least <= af_wear.spread)
		return AF_WEAR_NONE;
	return victim;
}

/* --- console ------------------------------------------------------------------------ */

uint32_t af_wear_percentage_used(void)
{
	if (!af_nand.endurance)
		return 0;
	uint64_t sum = 0, n = 0;
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		if (!(af_flash.blocks[g].flags & (AF_BLOCK_BAD | AF_BLOCK_UNREADABLE)) &&
		    AF_PPA_PPA_LUN_GET(af_nand_block_ppa(g)) == 0) {
			sum += af_flash.blocks[g].erases;
			n++;
		}
	return n ? (uint32_t)(sum * 100 / (n * af_nand.endurance)) : 0;
}

static int cmd_wear(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "static") && (!strcmp(argv[2], "on") || !strcmp(argv[2], "off"))) {
		af_wear.static_off = argv[2][1] == 'f';
		printf("static wear levelling %s\n", argv[2]);
		return AF_OK;
	}
	if (argc == 3 && !strcmp(argv[1], "spread")) {
		uint32_t n;
		if (af_parse_u32(argv[2], &n) || n == 0) {
			printf("error: spread must be a number of erases >= 1\n");
			return AF_EFAIL;
		}
		af_wear.spread = n;
		printf("static wear levelling moves cold data more than %lu erases below the most worn block\n",
		       (unsigned long)n);
		return AF_OK;
	}
	if (argc != 1)
		return AF_EUSAGE;
	if (!af_flash.nblocks) {
		printf("error: no flash\n");
		return AF_EFAIL;
	}
	uint32_t lo = UINT32_MAX, hi = 0, n = 0;
	uint64_t sum = 0;
	for (uint32_t g = 0; g < af_flash.nblocks; g++) {
		if (!counted(g))
			continue;
		uint32_t e = af_flash.blocks[g].erases;
		lo = e < lo ? e : lo;
		hi = e > hi ? e : hi;
		sum += e;
		n++;
	}
	if (!n) {
		printf("error: no good blocks\n");
		return AF_EFAIL;
	}
	printf("erase counts of %lu good blocks: min %lu, mean %lu.%02lu, max %lu, spread %lu\n", (unsigned long)n,
	       (unsigned long)lo, (unsigned long)(sum / n), (unsigned long)(sum * 100 / n % 100), (unsigned long)hi,
	       (unsigned long)(hi - lo));
	/* histogram: up to 8 buckets over [lo, hi] */
	uint32_t width = (hi - lo) / 8 + 1, counts[8] = { 0 };
	for (uint32_t g = 0; g < af_flash.nblocks; g++)
		if (counted(g))
			counts[(af_flash.blocks[g].erases - lo) / width]++;
	for (uint32_t i = 0; i < 8 && lo + i * width <= hi; i++) {
		uint32_t a = lo + i * width, b = a + width - 1, bar = counts[i] * 40 / n;
		printf("  %5lu-%-5lu %5lu ", (unsigned long)a, (unsigned long)b, (unsigned long)counts[i]);
		for (uint32_t k = 0; k < bar || (k == 0 && counts[i]); k++)
			putchar('#');
		putchar('\n');
	}
	for (uint32_t a = 0; a < AF_CKPT_AREAS; a++)
		for (uint32_t i = 0; i < af_ckpt.narea; i++) {
			uint32_t g = af_ckpt.area_block[a][i];
			if (g == AF_CKPT_NO_BLOCK)
				printf("checkpoint area %lu: no block yet (the next checkpoint takes one)\n", (unsigned long)a);
			else
				printf("checkpoint area %lu: block %lu, %lu erases\n", (unsigned long)a, (unsigned long)g,
				       (unsigned long)af_flash.blocks[g].erases);
		}
	printf("dynamic: least-worn free block first; static %s: spread %lu, %lu cold blocks moved (%lu pages), %lu failed; "
	       "checkpoint-area blocks rotated %lu\n",
	       af_wear.static_off ? "off" : "on", (unsigned long)af_wear.spread, (unsigned long)af_wear.moves,
	       (unsigned long)af_wear.copies, (unsigned long)af_wear.failed, (unsigned long)af_ckpt.rotated);
	if (af_nand.endurance)
		printf("life used: %lu%% (mean erases over the rated %lu per block, SMART's percentage used)\n",
		       (unsigned long)af_wear_percentage_used(), (unsigned long)af_nand.endurance);
	printf("(counts are saved with every checkpoint; erases since the newest one are lost with power)\n");
	return AF_OK;
}
AF_COMMAND(wear, "wear [static on|off | spread <erases>]",
	   "wear levelling: erase-count histogram, static part on/off, its spread threshold", cmd_wear);

#endif /* AFCTRL_FTL */
