/* `io`: the firmware as a host, through its own queue pair of the FTL core.
 *
 * Data is a stream of (seed, lba) so `io check` can verify what an
 * earlier `io write` (or an atomic group) left, e.g. across a power cycle. */
#include <stdio.h>
#include <string.h>

#include <system.h>

#include "console.h"
#include "ckpt.h"
#include "ftl.h"
#include "gc.h"
#include "fw.h"
#include "nand.h"
#include "pending.h"

#ifdef AFCTRL_FTL

/* The data of (seed, lba): word w is start + w * step, both a hash of (seed, lba), the step odd, so
 * neighbouring words and the same word of another (seed, lba) differ; one add per word (the CPU fills
 * a page while the core programs the last: a xorshift stream, ~16 cycles a word, was most of a random
 * write's time).  Seed 0 is zeros. */
typedef struct {
	uint32_t start, step;
} stream_t;

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	return x ^ (x >> 16);
}

static stream_t stream_of(uint32_t seed, uint32_t lba)
{
	stream_t s = {0, 0};
	if (seed) {
		s.start = mix(seed * 0x9e3779b9u ^ lba * 0x85ebca6bu);
		s.step = mix(s.start ^ 0x6a09e667u) | 1u;
	}
	return s;
}

static void fill(uint32_t *buf, uint32_t seed, uint32_t lba)
{
	stream_t s = stream_of(seed, lba);
	uint32_t v = s.start, step = s.step;
	_Static_assert(AF_ECC_CODEWORD % 16 == 0, "a page is whole groups of four words");
	for (uint32_t *end = buf + af_nand.page_data / 4; buf < end; buf += 4) {
		buf[0] = v;
		buf[1] = v + step;
		buf[2] = v + 2 * step;
		buf[3] = v + 3 * step;
		v += 4 * step;
	}
}

/* The first word of buf that differs from (seed, lba)'s data, or -1 (four words a step, like fill). */
static int compare(const uint32_t *buf, uint32_t seed, uint32_t lba, uint32_t *want)
{
	stream_t s = stream_of(seed, lba);
	uint32_t v = s.start, step = s.step, w = 0, words = af_nand.page_data / 4;
	for (; w < words; w += 4, v += 4 * step)
		if ((buf[w] ^ v) | (buf[w + 1] ^ (v + step)) | (buf[w + 2] ^ (v + 2 * step)) | (buf[w + 3] ^ (v + 3 * step)))
			break;
	for (; w < words; w++, v += step)
		if (buf[w] != v) {
			*want = v;
			return (int)w;
		}
	return -1;
}

/* AF_OK for a SUCCESS completion; otherwise says why and AF_EFAIL. */
static int check_status(int st, const char *what)
{
	if (st < 0) {
		printf("error: %s: no completion (is the core starved of blocks? see stats)\n", what);
		return AF_EFAIL;
	}
	if (st != AF_STATUS_SUCCESS) {
		printf("error: %s: status 0x%02x %s: %s\n", what, st, af_status_name(st), af_status_doc(st));
		return AF_EFAIL;
	}
	return AF_OK;
}

static int run(af_cmd_t *cmd, const char *what)
{
	return check_status(af_ftl_io(cmd, NULL), what);
}

static void block_cmd(af_cmd_t *cmd, unsigned opcode, uint32_t lba, void *buf)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->opcode = (uint8_t)opcode;
	cmd->lba = lba;
	cmd->nlb = 1;
	cmd->buf = (uint32_t)(uintptr_t)buf;
}

/* One block at lba between the device and buf. */
static int one_block(unsigned opcode, uint32_t lba, void *buf, const char *what)
{
	af_cmd_t cmd;
	block_cmd(&cmd, opcode, lba, buf);
	return run(&cmd, what);
}

static int parse_range(int argc, char **argv, int i, uint32_t *lba, uint32_t *n)
{
	*n = 1;
	if (i >= argc || af_parse_u32(argv[i], lba))
		return -1;
	if (i + 1 < argc && af_parse_u32(argv[i + 1], n))
		return -1;
	if (*n == 0 || *n > AF_FTL_IO_PAGES) {
		printf("error: count must be 1..%u\n", AF_FTL_IO_PAGES);
		return -2;
	}
	return 0;
}

/* io random|verify <seed> <writes> <range>: `writes` one-block writes at LBAs
 * drawn from xorshift32(seed) in [0, range); write i carries tag seed << 20 | i + 1.
 * GC and checkpoints run between batches of writes, as in the idle loop.  verify replays the
 * draws and checks every LBA written (tags kept in the scratch window at the top
 * of main RAM, so range <= AF_RAM_SCRATCH_BYTES / 4). */
#define IO_DEPTH 4 /* random writes in flight: one per die of the 2 x 2 build (past that, the fill limits) */
_Static_assert(AF_FTL_IO_PAGES >= IO_DEPTH + 1, "io random fills the next write's page while IO_DEPTH are in flight");

static uint32_t xorshift32(uint32_t x)
{
	x ^= x << 13;
	x ^= x >> 17;
	return x ^ (x << 5);
}

/* The LBA of the next write of the draw *x. */
static uint32_t next_lba(uint32_t *x, uint32_t range)
{
	*x = xorshift32(*x);
	return *x % range;
}

static void random_progress(uint32_t done, uint32_t writes, uint64_t t0)
{
	printf("random: %lu/%lu writes, %lu free blocks, gc %lu victims %lu copies, ckpt %lu, ", (unsigned long)done,
	       (unsigned long)writes, (unsigned long)af_ftl.free_blocks, (unsigned long)af_gc.victims,
	       (unsigned long)af_gc.copies, (unsigned long)af_ckpt.taken);
	af_print_u64(af_uptime_cycles() - t0);
	printf(" cycles\n");
}

/* The writes of `io random`, in batches of up to IO_DEPTH in flight: the CPU fills the next write's page
 * (of IO_DEPTH + 1 in io_buf, in turn) while the core programs the batch's on the dies.  A batch never has
 * two writes to one LBA: the core may complete them in either order.  GC and checkpoints run between
 * batches, when none is in flight: their commands share the queue pair. */
static int random_writes(uint32_t seed, uint32_t writes, uint32_t range)
{
	uint32_t *page[IO_DEPTH + 1], x = seed;
	for (uint32_t k = 0; k <= IO_DEPTH; k++)
		page[k] = (uint32_t *)af_ftl.io_buf + k * (af_nand.page_data / 4);
	uint64_t t0 = af_uptime_cycles();
	uint32_t lba = writes ? next_lba(&x, range) : 0, i = 0;
	if (writes)
		fill(page[0], seed << 20 | 1, lba);
	while (i < writes) {
		af_cmd_t cmd[IO_DEPTH];
		uint32_t n = 0, first = i;
		for (int clash = 0; n < IO_DEPTH && i < writes && !clash; ) {
			block_cmd(&cmd[n], AF_OPCODE_WRITE, lba, page[i % (IO_DEPTH + 1)]);
			af_dcache_invalidate();
			if (af_ftl_submit(&cmd[n]) < 0)
				break;
			n++;
			if (++i < writes) {
				lba = next_lba(&x, range);
				fill(page[i % (IO_DEPTH + 1)], seed << 20 | (i + 1), lba);
				for (uint32_t k = 0; k < n; k++)
					clash |= cmd[k].lba == lba;
			}
		}
		/* the batch's completions, in whatever order they come; the first write that failed ends the run */
		int status[IO_DEPTH];
		for (uint32_t k = 0; k < n; k++)
			status[k] = -1;
		for (uint32_t done = 0; done < n; done++) {
			uint16_t cid;
			int st = af_ftl_reap(AF_OPCODE_WRITE, &cid, NULL);
			uint32_t k = 0;
			while (k < n && cmd[k].cid != cid)
				k++;
			if (st < 0 || k == n)
				break; /* nothing came, or not one of these: the rest will not either */
			status[k] = st;
		}
		uint32_t failed = n == 0 ? first : UINT32_MAX, later_ok = 0;
		int failed_st = -1;
		for (uint32_t k = 0; k < n; k++)
			if (failed == UINT32_MAX && status[k] != AF_STATUS_SUCCESS) {
				failed = first + k;
				failed_st = status[k];
			} else if (failed != UINT32_MAX) {
				later_ok += status[k] == AF_STATUS_SUCCESS;
			}
		if (failed != UINT32_MAX) {
			check_status(failed_st, "write");
			/* `io verify <seed> <n>` checks the writes acknowledged before the first that failed */
			printf("random: stopped after %lu writes\n", (unsigned long)failed);
			if (later_ok)
				printf("warning: random: %lu writes after it (in flight with it) succeeded: they are not in "
				       "`io verify %lu %lu`\n", (unsigned long)later_ok, (unsigned long)seed, (unsigned long)failed);
			return AF_EFAIL;
		}
		af_console_idle();
		if (i / 512 != first / 512)
			random_progress(i - i % 512, writes, t0);
	}
	printf("random: %lu writes over %lu LBAs in ", (unsigned long)writes, (unsigned long)range);
	af_print_u64(af_uptime_cycles() - t0);
	printf(" cycles\n");
	return AF_OK;
}

static int io_random(int argc, char **argv, int verify)
{
	uint32_t seed, writes, range;
	if (argc != 5 || af_parse_u32(argv[2], &seed) || af_parse_u32(argv[3], &writes) || af_parse_u32(argv[4], &range))
		return AF_EUSAGE;
	if (seed == 0 || seed >= 1u << 12 || range == 0 || range > af_ftl.capacity ||
	    range > AF_RAM_SCRATCH_BYTES / 4 || writes >= 1u << 20) {
		printf("error: seed 1..4095, range 1..%lu, writes < 2^20\n",
		       (unsigned long)(af_ftl.capacity < AF_RAM_SCRATCH_BYTES / 4 ? af_ftl.capacity : AF_RAM_SCRATCH_BYTES / 4));
		return AF_EFAIL;
	}
	if (!verify)
		return random_writes(seed, writes, range);
	uint32_t *tags = (uint32_t *)(MAIN_RAM_BASE + MAIN_RAM_SIZE - AF_RAM_SCRATCH_BYTES);
	uint32_t x = seed;
	memset(tags, 0, 4 * range);
	for (uint32_t i = 0; i < writes; i++)
		tags[next_lba(&x, range)] = seed << 20 | (i + 1);
	/* IO_DEPTH reads in flight, a page each: the CPU compares one while the core reads the others */
	af_cmd_t cmd[IO_DEPTH];
	uint8_t live[IO_DEPTH] = {0};
	uint32_t next = 0, inflight = 0, checked = 0, bad = 0;
	for (uint32_t k = 0; k < IO_DEPTH; k++) {
		while (next < range && !tags[next])
			next++;
		if (next == range)
			break;
		block_cmd(&cmd[k], AF_OPCODE_READ, next++, (uint32_t *)af_ftl.io_buf + k * (af_nand.page_data / 4));
		if (af_ftl_submit(&cmd[k]) < 0)
			return check_status(-1, "read");
		live[k] = 1;
		inflight++;
	}
	while (inflight) {
		uint16_t cid;
		int st = af_ftl_reap(AF_OPCODE_READ, &cid, NULL);
		uint32_t k = 0;
		while (k < IO_DEPTH && !(live[k] && cmd[k].cid == cid))
			k++;
		if (check_status(k == IO_DEPTH ? -1 : st, "read"))
			return AF_EFAIL;
		live[k] = 0;
		inflight--;
		af_dcache_invalidate(); /* the page came in behind the cache */
		const uint32_t *got = (const uint32_t *)(uintptr_t)cmd[k].buf;
		uint32_t lba = (uint32_t)cmd[k].lba, want;
		int w = compare(got, tags[lba], lba, &want);
		if (w >= 0 && bad++ < 4)
			printf("lba %lu: word %d 0x%08lx, expected 0x%08lx (tag 0x%08lx)\n", (unsigned long)lba, w,
			       (unsigned long)got[w], (unsigned long)want, (unsigned long)tags[lba]);
		checked++;
		while (next < range && !tags[next])
			next++;
		if (next < range) {
			block_cmd(&cmd[k], AF_OPCODE_READ, next++, (void *)(uintptr_t)got);
			if (af_ftl_submit(&cmd[k]) < 0)
				return check_status(-1, "read");
			live[k] = 1;
			inflight++;
		}
	}
	printf("verify: %lu LBAs checked, %lu wrong: %s\n", (unsigned long)checked, (unsigned long)bad, bad ? "FAIL" : "pass");
	return bad ? AF_EFAIL : AF_OK;
}

/* io tx write|final|check <tid> <seed> <lba> [count] | commit|abort <tid>: transactions (check = TX_READ) */
static int io_tx(int argc, char **argv)
{
	uint32_t tid, seed, lba, n;
	if (argc < 4 || af_parse_u32(argv[3], &tid))
		return AF_EUSAGE;
	const char *op = argv[2];
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	cmd.tid = tid;
	if (!strcmp(op, "commit") || !strcmp(op, "abort")) {
		if (argc != 4)
			return AF_EUSAGE;
		cmd.opcode = op[0] == 'c' ? AF_OPCODE_TX_COMMIT : AF_OPCODE_TX_ABORT;
		if (run(&cmd, op[0] == 'c' ? "tx commit" : "tx abort"))
			return AF_EFAIL;
		printf("transaction %lu %s\n", (unsigned long)tid, op[0] == 'c' ? "committed" : "aborted");
		return AF_OK;
	}
	if (strcmp(op, "write") && strcmp(op, "final") && strcmp(op, "check"))
		return AF_EUSAGE;
	if (argc < 6 || argc > 7 || af_parse_u32(argv[4], &seed))
		return AF_EUSAGE;
	int r = parse_range(argc, argv, 5, &lba, &n);
	if (r)
		return r == -1 ? AF_EUSAGE : AF_EFAIL;
	uint32_t *buf = af_ftl.io_buf, words = af_nand.page_data / 4;
	cmd.lba = lba;
	cmd.nlb = n;
	cmd.buf = (uint32_t)(uintptr_t)buf;
	if (op[0] != 'c') {
		for (uint32_t i = 0; i < n; i++)
			fill(buf + i * words, seed, lba + i);
		af_dcache_invalidate();
		cmd.opcode = AF_OPCODE_TX_WRITE;
		if (op[0] == 'f')
			cmd.flags = AF_CMD_FLAGS_TX_FINAL_MASK;
		if (run(&cmd, "tx write"))
			return AF_EFAIL;
		printf("transaction %lu: staged %lu blocks at lba %lu (seed %lu)%s\n", (unsigned long)tid, (unsigned long)n,
		       (unsigned long)lba, (unsigned long)seed, op[0] == 'f' ? ", committed" : "");
		return AF_OK;
	}
	memset(buf, 0xa5, n * af_nand.page_data);
	af_dcache_invalidate();
	cmd.opcode = AF_OPCODE_TX_READ;
	if (run(&cmd, "tx read"))
		return AF_EFAIL;
	af_dcache_invalidate();
	uint32_t bad = 0, want;
	for (uint32_t i = 0; i < n; i++)
		if (compare(buf + i * words, seed, lba + i, &want) >= 0)
			bad++;
	printf("transaction %lu: check %lu blocks at lba %lu (seed %lu): %s\n", (unsigned long)tid, (unsigned long)n,
	       (unsigned long)lba, (unsigned long)seed, bad ? "FAIL" : "pass");
	return bad ? AF_EFAIL : AF_OK;
}

/* io append <seed> <lba> [count] | remap <lba> <token> <count> [<lba> <token> <count>]... | release <token> */
static int io_append(int argc, char **argv)
{
	const char *op = argv[1];
	uint32_t *buf = af_ftl.io_buf, words = af_nand.page_data / 4;
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	if (!strcmp(op, "append")) {
		uint32_t seed, lba, n;
		if (argc < 4 || argc > 5 || af_parse_u32(argv[2], &seed))
			return AF_EUSAGE;
		int r = parse_range(argc, argv, 3, &lba, &n);
		if (r)
			return r == -1 ? AF_EUSAGE : AF_EFAIL;
		/* the data is (seed, lba + i): after a remap to lba, `io check <seed> <lba> <count>` passes */
		for (uint32_t i = 0; i < n; i++)
			fill(buf + i * words, seed, lba + i);
		af_dcache_invalidate();
		cmd.opcode = AF_OPCODE_APPEND;
		cmd.nlb = n;
		cmd.buf = (uint32_t)(uintptr_t)buf;
		uint64_t token;
		int st = af_ftl_io(&cmd, &token);
		if (st != AF_STATUS_SUCCESS) {
			if (st < 0)
				printf("error: append: no completion\n");
			else
				printf("error: append: status 0x%02x %s: %s\n", st, af_status_name(st), af_status_doc(st));
			return AF_EFAIL;
		}
		printf("appended %lu blocks (seed %lu, data for lba %lu): token ", (unsigned long)n, (unsigned long)seed,
		       (unsigned long)lba);
		af_print_hex64(token);
		printf("\n");
		return AF_OK;
	}
	if (!strcmp(op, "release")) {
		uint64_t token;
		if (argc != 3 || af_parse_u64(argv[2], &token))
			return AF_EUSAGE;
		cmd.token = token;
		cmd.opcode = AF_OPCODE_RELEASE;
		if (run(&cmd, "release"))
			return AF_EFAIL;
		printf("released\n");
		return AF_OK;
	}
	/* remap */
	uint32_t n = (uint32_t)(argc - 2) / 3;
	if (argc < 5 || (argc - 2) % 3)
		return AF_EUSAGE;
	if (n * AF_REMAP_ENTRY_SIZE > AF_FTL_IO_PAGES * af_nand.page_data) {
		printf("error: too many triples for the io buffer\n");
		return AF_EFAIL;
	}
	af_remap_entry_t *list = (af_remap_entry_t *)buf;
	memset(list, 0, n * sizeof(*list));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t lba, nlb;
		uint64_t token;
		if (af_parse_u32(argv[2 + 3 * i], &lba) || af_parse_u64(argv[3 + 3 * i], &token) ||
		    af_parse_u32(argv[4 + 3 * i], &nlb))
			return AF_EUSAGE;
		list[i].lba = lba;
		list[i].token = token;
		list[i].nlb = nlb;
	}
	af_dcache_invalidate();
	cmd.opcode = AF_OPCODE_REMAP;
	cmd.list = (uint32_t)(uintptr_t)list;
	cmd.nlist = n;
	if (run(&cmd, "remap"))
		return AF_EFAIL;
	printf("remapped %lu appends\n", (unsigned long)n);
	return AF_OK;
}

static int cmd_io(int argc, char **argv)
{
	if (argc < 2)
		return AF_EUSAGE;
	if (!af_ftl.running) {
		printf("error: the FTL core is not running\n");
		return AF_EFAIL;
	}
	af_cmd_t cmd;
	memset(&cmd, 0, sizeof(cmd));
	uint32_t *buf = af_ftl.io_buf;
	uint32_t words = af_nand.page_data / 4;
	uint32_t lba, n, seed;
	const char *op = argv[1];

	if (!strcmp(op, "write") || !strcmp(op, "check")) {
		/* io write|check <seed> <lba> [count] */
		if (argc < 4 || argc > 5 || af_parse_u32(argv[2], &seed))
			return AF_EUSAGE;
		int r = parse_range(argc, argv, 3, &lba, &n);
		if (r)
			return r == -1 ? AF_EUSAGE : AF_EFAIL;
		cmd.lba = lba;
		cmd.nlb = n;
		cmd.buf = (uint32_t)(uintptr_t)buf;
		if (op[0] == 'w') {
			for (uint32_t i = 0; i < n; i++)
				fill(buf + i * words, seed, lba + i);
			af_dcache_invalidate();
			cmd.opcode = AF_OPCODE_WRITE;
			if (run(&cmd, "write"))
				return AF_EFAIL;
			printf("wrote %lu blocks at lba %lu (seed %lu)\n", (unsigned long)n, (unsigned long)lba,
			       (unsigned long)seed);
			return AF_OK;
		}
		memset(buf, 0xa5, n * af_nand.page_data);
		af_dcache_invalidate();
		cmd.opcode = AF_OPCODE_READ;
		if (run(&cmd, "read"))
			return AF_EFAIL;
		af_dcache_invalidate();
		uint32_t bad = 0, want;
		for (uint32_t i = 0; i < n; i++) {
			int w = compare(buf + i * words, seed, lba + i, &want);
			if (w >= 0 && !bad++)
				printf("lba %lu word %d: 0x%08lx, expected 0x%08lx\n", (unsigned long)(lba + i), w,
				       (unsigned long)buf[i * words + w], (unsigned long)want);
		}
		printf("check %lu blocks at lba %lu (seed %lu): %s\n", (unsigned long)n, (unsigned long)lba,
		       (unsigned long)seed, bad ? "FAIL" : "pass");
		return bad ? AF_EFAIL : AF_OK;
	}
	if (!strcmp(op, "read")) {
		/* io read <lba>: the first bytes */
		if (argc != 3 || af_parse_u32(argv[2], &lba))
			return AF_EUSAGE;
		if (one_block(AF_OPCODE_READ, lba, buf, "read"))
			return AF_EFAIL;
		af_dcache_invalidate();
		printf("lba %lu:", (unsigned long)lba);
		for (unsigned w = 0; w < 8; w++)
			printf(" %08lx", (unsigned long)buf[w]);
		printf(" ...\n");
		return AF_OK;
	}
	if (!strcmp(op, "atomic")) {
		/* io atomic <seed> <lba> <lba> ...: one group, each lba its pattern */
		if (argc < 4 || af_parse_u32(argv[2], &seed))
			return AF_EUSAGE;
		n = (uint32_t)(argc - 3);
		if (n > AF_FTL_IO_PAGES - 1) {
			printf("error: at most %u LBAs (the io buffer holds the list too)\n", AF_FTL_IO_PAGES - 1);
			return AF_EFAIL;
		}
		af_atomic_entry_t *list = (af_atomic_entry_t *)(buf + n * words);
		for (uint32_t i = 0; i < n; i++) {
			if (af_parse_u32(argv[3 + i], &lba))
				return AF_EUSAGE;
			fill(buf + i * words, seed, lba);
			list[i].lba = lba;
			list[i].buf = (uint32_t)(uintptr_t)(buf + i * words);
		}
		af_dcache_invalidate();
		cmd.opcode = AF_OPCODE_ATOMIC_WRITE;
		cmd.list = (uint32_t)(uintptr_t)list;
		cmd.nlist = n;
		if (run(&cmd, "atomic write"))
			return AF_EFAIL;
		printf("wrote an atomic group of %lu blocks (seed %lu)\n", (unsigned long)n, (unsigned long)seed);
		return AF_OK;
	}
	if (!strcmp(op, "trim")) {
		if (argc < 3 || argc > 4)
			return AF_EUSAGE;
		int r = parse_range(argc, argv, 2, &lba, &n);
		if (r)
			return r == -1 ? AF_EUSAGE : AF_EFAIL;
		cmd.opcode = AF_OPCODE_DEALLOCATE;
		cmd.lba = lba;
		cmd.nlb = n;
		if (run(&cmd, "trim"))
			return AF_EFAIL;
		printf("trimmed %lu blocks at lba %lu\n", (unsigned long)n, (unsigned long)lba);
		return AF_OK;
	}
	if (!strcmp(op, "flush")) {
		if (argc != 2)
			return AF_EUSAGE;
		cmd.opcode = AF_OPCODE_FLUSH;
		if (run(&cmd, "flush"))
			return AF_EFAIL;
		printf("flushed\n");
		return AF_OK;
	}
	if (!strcmp(op, "random") || !strcmp(op, "verify"))
		return io_random(argc, argv, op[0] == 'v');
	if (!strcmp(op, "tx"))
		return io_tx(argc, argv);
	if (!strcmp(op, "append") || !strcmp(op, "remap") || !strcmp(op, "release"))
		return io_append(argc, argv);
	printf("error: unknown io operation '%s'\n", op);
	return AF_EUSAGE;
}
static int cmd_tx(int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return AF_EUSAGE;
	uint32_t lim = ftl_rd(AF_FTL_TX_LIMITS), st = ftl_rd(AF_FTL_TX_STATUS);
	uint32_t slots = (lim & AF_FTL_TX_LIMITS_MAX_OPEN_TX) >> AF_FTL_TX_LIMITS_MAX_OPEN_TX_SHIFT;
	uint32_t entries = (lim & AF_FTL_TX_LIMITS_MAX_PENDING) >> AF_FTL_TX_LIMITS_MAX_PENDING_SHIFT;
	uint32_t open = (st & AF_FTL_TX_STATUS_OPEN) >> AF_FTL_TX_STATUS_OPEN_SHIFT;
	uint32_t free = (st & AF_FTL_TX_STATUS_PENDING_FREE) >> AF_FTL_TX_STATUS_PENDING_FREE_SHIFT;
	printf("transactions: %lu open of %lu; pending bindings: %lu of %lu entries used\n", (unsigned long)open,
	       (unsigned long)slots, (unsigned long)(entries - free), (unsigned long)entries);
	uint64_t floor = af_ftl_tx_floor();
	if (floor == UINT64_MAX) {
		printf("no transaction or append is open\n");
	} else {
		printf("oldest open transaction or live append began at seq ");
		af_print_u64(floor);
		printf(" (");
		af_print_u64(af_ftl_seq_next() - floor);
		printf(" pages written since)\n");
	}
	printf("the last checkpoint recorded %lu open transactions and %lu live appends (%lu records; %lu snapshots "
	       "since boot)\n", (unsigned long)af_pend.tx, (unsigned long)af_pend.appends, (unsigned long)af_pend.n,
	       (unsigned long)af_pend.snapshots);
	return AF_OK;
}
AF_COMMAND(tx, "tx", "open transactions and live appends, pending-bindings table use, what the last checkpoint recorded",
	   cmd_tx);

AF_COMMAND(io, "io write|check <seed> <lba> [count] | read <lba> | atomic <seed> <lba>... | trim <lba> [count] | flush | "
	   "random|verify <seed> <writes> <range> | tx write|final|check <tid> <seed> <lba> [count] | tx commit|abort <tid> | "
	   "append <seed> <lba> [count] | remap (<lba> <token> <count>)... | release <token>",
	   "host commands through the firmware's own queue pair (seed 0 = zeros)", cmd_io);

#endif
