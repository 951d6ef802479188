/* gcsim: the firmware's GC policies (firmware/policy.c) driven on the host at any device size.
 *
 * The thinnest stand-in for what the RTL core does for GC (rtl/ftl: the allocator, the log writer, the
 * block table's valid counts, the relocator's rebind) around the firmware's own victim choice and
 * least-worn pick.  What it models:
 *  - D dies of B blocks of P pages; every program takes the next die in turn (the core's striping) and that
 *    die's open block of the stream; a die's next block is its least-worn erased one (af_policy_least_worn);
 *  - one write stream (GcPlacement SHARED: the core's one open block per die takes the host's writes and
 *    GC's copies) or two (SEPARATE: GC's copies go to open blocks of their own);
 *  - valid counts per block, a block's close_seq (the log's next seq when its last page is programmed),
 *    the L2P map, and each page's OOB (LBA, version);
 *  - GC as firmware/gc.c runs it: before a host write, while fewer than `low` erased blocks, collect the
 *    policy's victim among the full blocks a checkpoint covers (close_seq <= the floor), taking a
 *    checkpoint (floor = the log's next seq) when none is covered; automatic checkpoints every `ckpt`
 *    pages programmed (0: every closed block is covered); the victim's valid pages move in page order, then
 *    it is erased and goes back to its die's pool.  Host writes never take the last `reserve` erased
 *    blocks (firmware/ftl.c's refill; GC runs until there are more), GC's copies may.
 * What it leaves out: timing, the write cache, records and checkpoint pages (WA here counts data pages:
 * host pages and GC copies, as the SoC's `gc` copies), bad blocks, static wear levelling, transactions.
 *
 * Usage:
 *   gcsim run key=value ...   a workload (see main's keys), results as key=value lines
 *   gcsim pick                stdin: "policy ppb now" then "g valid close_seq" lines; prints the victim
 *                             af_policy_victim_* chooses (or -1), and the score of each line
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define NONE UINT32_MAX

enum { FREE, OPEN, FULL };

typedef struct {
	uint32_t dies, bpd, ppb, lbas, low, reserve, ckpt_every;
	unsigned policy, placement;
	uint32_t nblocks, npages;
	/* per page: its OOB (lba, version) and what wrote it */
	uint32_t *page_lba, *page_ver;
	uint8_t *page_gc;
	/* per block */
	uint32_t *valid, *erases, *written;
	uint64_t *close_seq;
	uint8_t *state, *had_host, *had_gc;
	/* per die: the pool of erased blocks (global numbers) and their erase counts, beside it */
	uint32_t *pool, *pool_wear, *pool_n;
	uint32_t free_total;
	/* streams: [0] the host's, [1] GC's (SEPARATE only); per die the open block and its next page */
	uint32_t *open[2], *next_page[2], next_die[2];
	/* the map and the newest version of every LBA */
	uint32_t *map, *ver;
	uint64_t seq, floor;
	uint64_t host, copies, victims, victim_valid, ckpts;
	int stuck;
} gcdev_t;

static void die_msg(const char *why)
{
	fprintf(stderr, "gcsim: %s\n", why);
	exit(2);
}

static void *xcalloc(size_t n, size_t s)
{
	void *p = calloc(n ? n : 1, s);
	if (!p)
		die_msg("out of memory");
	return p;
}

static uint32_t xorshift32(uint32_t x)
{
	x ^= x << 13;
	x ^= x >> 17;
	return x ^ (x << 5);
}

static void pool_push(gcdev_t *d, uint32_t g)
{
	uint32_t die = g / d->bpd, i = d->pool_n[die]++;
	d->pool[die * d->bpd + i] = g;
	d->pool_wear[die * d->bpd + i] = d->erases[g];
	d->state[g] = FREE;
	d->free_total++;
}

static uint32_t pool_pop(gcdev_t *d, uint32_t die)
{
	uint32_t n = d->pool_n[die];
	if (!n)
		return NONE;
	uint32_t *pool = &d->pool[die * d->bpd], *wear = &d->pool_wear[die * d->bpd];
	uint32_t pick = af_policy_least_worn(wear, n), top = n - 1, g = pool[pick];
	pool[pick] = pool[top];
	wear[pick] = wear[top];
	d->pool_n[die] = top;
	d->free_total--;
	return g;
}

/* The next page of stream s: the next die in turn with room (its open block, or a new one from its pool);
 * NONE when no die has one.  for_host: the last `reserve` erased blocks are not the host's. */
static uint32_t alloc_page(gcdev_t *d, unsigned s, int for_host)
{
	for (uint32_t tries = 0; tries < d->dies; tries++) {
		uint32_t die = d->next_die[s];
		d->next_die[s] = (die + 1) % d->dies;
		uint32_t g = d->open[s][die];
		if (g == NONE) {
			if (for_host && d->free_total <= d->reserve)
				continue;
			if ((g = pool_pop(d, die)) == NONE)
				continue;
			d->open[s][die] = g;
			d->next_page[s][die] = 0;
			d->state[g] = OPEN;
		}
		uint32_t ppa = g * d->ppb + d->next_page[s][die]++;
		if (d->next_page[s][die] == d->ppb)
			d->open[s][die] = NONE; /* closed once programmed (program()) */
		return ppa;
	}
	return NONE;
}

static void program(gcdev_t *d, uint32_t ppa, uint32_t lba, uint32_t version, int gc)
{
	uint32_t g = ppa / d->ppb;
	d->page_lba[ppa] = lba;
	d->page_ver[ppa] = version;
	d->page_gc[ppa] = (uint8_t)gc;
	(gc ? d->had_gc : d->had_host)[g] = 1;
	uint32_t old = d->map[lba];
	if (old != NONE)
		d->valid[old / d->ppb]--;
	d->map[lba] = ppa;
	d->valid[g]++;
	d->seq++;
	if (++d->written[g] == d->ppb) {
		d->state[g] = FULL;
		d->close_seq[g] = d->seq; /* every page of it is older */
	}
}

/* Pages GC's copies can take: what is left in its stream's open blocks and every erased block (gc.c
 * copy_budget, without the block kept for the host's commands in the core: here none is in flight). */
static uint64_t copy_budget(const gcdev_t *d)
{
	unsigned s = d->placement == AF_GCPLACEMENT_SEPARATE;
	uint64_t room = (uint64_t)d->free_total * d->ppb;
	for (uint32_t die = 0; die < d->dies; die++)
		if (d->open[s][die] != NONE)
			room += d->ppb - d->next_page[s][die];
	return room;
}

/* gc.c pick_within: the policy's victim among the full blocks closed at or below floor whose valid pages
 * fit the budget */
static int pick(gcdev_t *d, uint64_t floor, uint32_t *victim)
{
	af_policy_victim_t v;
	uint64_t budget = copy_budget(d);
	af_policy_victim_begin(&v, d->policy, d->ppb, d->seq);
	for (uint32_t g = 0; g < d->nblocks; g++)
		if (d->state[g] == FULL && d->close_seq[g] <= floor && d->valid[g] <= budget)
			af_policy_victim_consider(&v, g, d->valid[g], d->close_seq[g]);
	*victim = v.victim;
	return v.found;
}

static void checkpoint(gcdev_t *d)
{
	d->floor = d->seq;
	d->ckpts++;
}

/* gc.c af_gc_step: 0, or -1 when nothing to collect or no room for the copies */
static int gc_step(gcdev_t *d)
{
	uint32_t g;
	uint64_t floor = d->ckpt_every ? d->floor : UINT64_MAX;
	if (!pick(d, floor, &g)) {
		if (!pick(d, UINT64_MAX, &g))
			return -1;
		checkpoint(d); /* pick_covered: a checkpoint now covers every closed block */
		if (!pick(d, d->floor, &g))
			return -1;
	}
	unsigned s = d->placement == AF_GCPLACEMENT_SEPARATE;
	d->victims++;
	d->victim_valid += d->valid[g];
	for (uint32_t p = g * d->ppb; p < (g + 1) * d->ppb && d->valid[g]; p++) {
		uint32_t lba = d->page_lba[p];
		if (lba == NONE || d->map[lba] != p)
			continue; /* superseded */
		uint32_t to = alloc_page(d, s, 0);
		if (to == NONE)
			die_msg("no page for a copy within the budget");
		program(d, to, lba, d->page_ver[p], 1);
		d->copies++;
	}
	if (d->valid[g])
		die_msg("a victim still holds valid pages");
	for (uint32_t p = g * d->ppb; p < (g + 1) * d->ppb; p++)
		d->page_lba[p] = NONE;
	d->erases[g]++;
	d->written[g] = 0;
	d->had_host[g] = d->had_gc[g] = 0;
	pool_push(d, g);
	return 0;
}

static int host_write(gcdev_t *d, uint32_t lba)
{
	/* foreground GC below `low` erased blocks, and always above the reserve the host's writes never take */
	while (d->free_total < d->low || d->free_total <= d->reserve)
		if (gc_step(d) < 0)
			break;
	uint32_t ppa = alloc_page(d, 0, 1);
	if (ppa == NONE) {
		d->stuck = 1;
		return -1;
	}
	program(d, ppa, lba, ++d->ver[lba], 0);
	d->host++;
	if (d->ckpt_every && d->seq - d->floor >= d->ckpt_every)
		checkpoint(d); /* `ckpt every <pages>`: pages programmed since the last one */
	return 0;
}

/* -- workloads ------------------------------------------------------------------------------ */

typedef struct {
	uint32_t x;         /* xorshift32 state (io random's draw: x = xorshift32(x); lba = x % range) */
	uint32_t hot_writes; /* per mille of writes to the hot LBAs (0: uniform) */
	uint32_t hot_lbas;   /* per mille of the LBAs that are hot: the first ones */
	uint32_t lbas;
} trace_t;

static uint32_t next_lba(trace_t *t)
{
	t->x = xorshift32(t->x);
	if (!t->hot_writes)
		return t->x % t->lbas;
	uint32_t hot = (uint32_t)((uint64_t)t->lbas * t->hot_lbas / 1000);
	if (hot == 0)
		hot = 1;
	int to_hot = t->x % 1000 < t->hot_writes;
	t->x = xorshift32(t->x);
	return to_hot ? t->x % hot : hot + t->x % (t->lbas - hot);
}

static uint32_t arg(int argc, char **argv, const char *key, uint32_t dflt)
{
	size_t n = strlen(key);
	for (int i = 2; i < argc; i++)
		if (!strncmp(argv[i], key, n) && argv[i][n] == '=')
			return (uint32_t)strtoul(argv[i] + n + 1, NULL, 0);
	return dflt;
}

static gcdev_t *dev_new(int argc, char **argv)
{
	gcdev_t *d = xcalloc(1, sizeof(*d));
	d->dies = arg(argc, argv, "dies", 4);
	d->bpd = arg(argc, argv, "blocks_per_die", 256);
	d->ppb = arg(argc, argv, "ppb", 64);
	d->lbas = arg(argc, argv, "lbas", 0);
	d->low = arg(argc, argv, "low", d->dies);
	d->reserve = arg(argc, argv, "reserve", AF_LIMITS_GC_RESERVE_BLOCKS);
	d->ckpt_every = arg(argc, argv, "ckpt", 0);
	d->policy = arg(argc, argv, "policy", AF_GCPOLICY_GREEDY);
	d->placement = arg(argc, argv, "placement", AF_GCPLACEMENT_SHARED);
	if (!d->dies || !d->bpd || !d->ppb || !d->lbas || af_gcpolicy_name(d->policy)[0] == '?' ||
	    af_gcplacement_name(d->placement)[0] == '?')
		die_msg("bad geometry, lbas or policy");
	d->nblocks = d->dies * d->bpd;
	d->npages = d->nblocks * d->ppb;
	if (d->lbas >= d->npages)
		die_msg("lbas must be fewer than the pages");
	d->page_lba = xcalloc(d->npages, 4);
	d->page_ver = xcalloc(d->npages, 4);
	d->page_gc = xcalloc(d->npages, 1);
	for (uint32_t p = 0; p < d->npages; p++)
		d->page_lba[p] = NONE;
	d->valid = xcalloc(d->nblocks, 4);
	d->erases = xcalloc(d->nblocks, 4);
	d->written = xcalloc(d->nblocks, 4);
	d->close_seq = xcalloc(d->nblocks, 8);
	d->state = xcalloc(d->nblocks, 1);
	d->had_host = xcalloc(d->nblocks, 1);
	d->had_gc = xcalloc(d->nblocks, 1);
	d->pool = xcalloc(d->nblocks, 4);
	d->pool_wear = xcalloc(d->nblocks, 4);
	d->pool_n = xcalloc(d->dies, 4);
	for (unsigned s = 0; s < 2; s++) {
		d->open[s] = xcalloc(d->dies, 4);
		d->next_page[s] = xcalloc(d->dies, 4);
		for (uint32_t i = 0; i < d->dies; i++)
			d->open[s][i] = NONE;
	}
	d->map = xcalloc(d->lbas, 4);
	d->ver = xcalloc(d->lbas, 4);
	for (uint32_t l = 0; l < d->lbas; l++)
		d->map[l] = NONE;
	for (uint32_t g = d->nblocks; g-- > 0;)
		pool_push(d, g);
	return d;
}

/* every LBA written reads back its newest version through the map (the page's OOB names it) */
static uint32_t lost(const gcdev_t *d)
{
	uint32_t n = 0;
	for (uint32_t l = 0; l < d->lbas; l++) {
		uint32_t p = d->map[l];
		if (d->ver[l] == 0 ? p != NONE : p == NONE || d->page_lba[p] != l || d->page_ver[p] != d->ver[l])
			n++;
	}
	/* and the block table's counts are the map's */
	uint32_t *count = xcalloc(d->nblocks, 4);
	for (uint32_t l = 0; l < d->lbas; l++)
		if (d->map[l] != NONE)
			count[d->map[l] / d->ppb]++;
	for (uint32_t g = 0; g < d->nblocks; g++)
		n += count[g] != d->valid[g];
	free(count);
	return n;
}

static int run(int argc, char **argv)
{
	gcdev_t *d = dev_new(argc, argv);
	trace_t t = { .x = arg(argc, argv, "seed", 1), .hot_writes = arg(argc, argv, "hot_writes", 0),
		      .hot_lbas = arg(argc, argv, "hot_lbas", 200), .lbas = d->lbas };
	uint32_t fill = arg(argc, argv, "fill", 1), warm = arg(argc, argv, "warm", 0);
	uint32_t measure = arg(argc, argv, "measure", 0), windows = arg(argc, argv, "windows", 10);
	uint32_t warm_seed = arg(argc, argv, "warm_seed", 0), from_stdin = arg(argc, argv, "stdin", 0);
	if (!t.x || (t.hot_writes && (t.hot_lbas == 0 || t.hot_lbas >= 1000)))
		die_msg("seed must be nonzero, hot_lbas in 1..999");
	int rc = 0;
	/* the fill: every LBA once, in order */
	for (uint32_t l = 0; fill && l < d->lbas && rc == 0; l++)
		rc = host_write(d, l);
	trace_t w = t;
	if (warm_seed)
		w.x = warm_seed; /* the warm-up's own draw (the SoC bench's: io random with another seed) */
	for (uint32_t i = 0; i < warm && rc == 0; i++)
		rc = host_write(d, next_lba(warm_seed ? &w : &t));
	uint64_t h0 = d->host, c0 = d->copies, v0 = d->victims, vv0 = d->victim_valid, k0 = d->ckpts;
	if (from_stdin) {
		/* the measured writes: LBAs from stdin, one per line */
		unsigned long lba;
		while (rc == 0 && scanf("%lu", &lba) == 1) {
			if (lba >= d->lbas)
				die_msg("LBA out of range");
			rc = host_write(d, (uint32_t)lba);
		}
	} else {
		uint32_t per = windows ? (measure + windows - 1) / windows : measure;
		uint64_t wh = d->host, wc = d->copies;
		for (uint32_t i = 0; i < measure && rc == 0; i++) {
			rc = host_write(d, next_lba(&t));
			if (per && ((i + 1) % per == 0 || i + 1 == measure)) {
				printf("window host=%" PRIu64 " copies=%" PRIu64 "\n", d->host - wh, d->copies - wc);
				wh = d->host;
				wc = d->copies;
			}
		}
	}
	uint32_t mixed = 0, erases_max = 0, erases_min = UINT32_MAX;
	for (uint32_t g = 0; g < d->nblocks; g++) {
		mixed += d->had_host[g] && d->had_gc[g];
		erases_max = d->erases[g] > erases_max ? d->erases[g] : erases_max;
		erases_min = d->erases[g] < erases_min ? d->erases[g] : erases_min;
	}
	printf("rc=%d stuck=%d host=%" PRIu64 " copies=%" PRIu64 " victims=%" PRIu64 " victim_valid=%" PRIu64
	       " ckpts=%" PRIu64 " total_host=%" PRIu64 " total_copies=%" PRIu64 " mixed_blocks=%u"
	       " erases_min=%u erases_max=%u lost=%u pages=%u\n",
	       rc, d->stuck, d->host - h0, d->copies - c0, d->victims - v0, d->victim_valid - vv0, d->ckpts - k0,
	       d->host, d->copies, mixed, erases_min, erases_max, lost(d), d->npages);
	return 0;
}

static int pick_mode(void)
{
	unsigned policy;
	uint32_t ppb;
	uint64_t now;
	if (scanf("%u %u %" SCNu64, &policy, &ppb, &now) != 3)
		die_msg("pick: policy ppb now");
	af_policy_victim_t v;
	af_policy_victim_begin(&v, policy, ppb, now);
	uint32_t g, valid;
	uint64_t close_seq;
	while (scanf("%u %u %" SCNu64, &g, &valid, &close_seq) == 3) {
		af_policy_victim_consider(&v, g, valid, close_seq);
		if (valid < ppb)
			printf("score %u %" PRIu64 "\n", g,
			       af_policy_score(policy, valid, ppb, now > close_seq ? now - close_seq : 1));
	}
	printf("victim %d\n", v.found ? (int)v.victim : -1);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return run(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "pick"))
		return pick_mode();
	if (argc >= 3 && !strcmp(argv[1], "named")) {
		char name[32];
		int p = af_policy_named(argv[2]);
		af_policy_name(p < 0 ? 0 : (unsigned)p, name, sizeof(name));
		printf("%d %s\n", p, name);
		return 0;
	}
	die_msg("usage: gcsim run key=value... | gcsim pick | gcsim named <name>");
	return 2;
}
