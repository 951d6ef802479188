/* Flash commands: nand, bbt, map, block. */
#include <stdio.h>
#include <string.h>

#include "anchor.h"
#include "ckpt.h"
#include "console.h"
#include "flash.h"
#include "mapload.h"
#include "ftl.h"
#include "fw.h"
#include "nand.h"

static int need_nand(void)
{
	if (!af_nand_present()) {
		printf("error: no NAND controller in this build\n");
		return 0;
	}
	if (!af_nand.up) {
		printf("error: NAND bring-up failed at boot (see the boot report)\n");
		return 0;
	}
	return 1;
}

static int need_scan(void)
{
	if (!need_nand())
		return 0;
	if (!af_flash.scanned) {
		printf("error: recovery did not run at boot (see the boot report)\n");
		return 0;
	}
	return 1;
}

/* A block number argument of a command that needs the scanned device: 0, or the command's error code. */
static int parse_block(const char *arg, uint32_t *b)
{
	if (af_parse_u32(arg, b))
		return AF_EUSAGE;
	if (!need_scan())
		return AF_EFAIL;
	if (*b >= af_flash.nblocks) {
		printf("error: block %lu out of range (0..%lu)\n", (unsigned long)*b, (unsigned long)(af_flash.nblocks - 1));
		return AF_EFAIL;
	}
	return 0;
}

static uint32_t le(const uint8_t *p, unsigned n)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static void print_text(const uint8_t *p, unsigned n)
{
	while (n && (p[n - 1] == ' ' || p[n - 1] == 0))
		n--;
	for (unsigned i = 0; i < n; i++)
		putchar(p[i] >= 0x20 && p[i] <= 0x7e ? p[i] : '?');
}

/* nand id: READ ID (00h and 20h) and READ PARAMETER PAGE on every target, now. */
static int nand_id(void)
{
	static uint8_t pp[AF_ONFI_PARAM_PAGE_BYTES];
	int fails = 0;
	for (unsigned t = 0; t < af_nand.targets; t++) {
		unsigned ch = t / af_nand.ways, way = t % af_nand.ways;
		uint8_t id[AF_NAND_ID_LEN], sig[4];
		int r = af_nand_read_id(ch, way, 0x00, id, sizeof(id));
		if (r == AF_NANDRESULT_OK)
			r = af_nand_read_id(ch, way, 0x20, sig, sizeof(sig));
		if (r != AF_NANDRESULT_OK) {
			printf("error: ch %u way %u: READ ID: %s\n", ch, way, af_nand_result_name(r));
			fails++;
			continue;
		}
		printf("ch %u way %u: id", ch, way);
		for (unsigned i = 0; i < sizeof(id); i++)
			printf(" %02x", id[i]);
		printf(", id 20h \"");
		print_text(sig, 4);
		printf("\"\n");
		int copy = af_nand_read_param(ch, way, pp);
		if (copy < 0) {
			printf("error: ch %u way %u: no parameter page copy with a good CRC\n", ch, way);
			fails++;
			continue;
		}
		printf("  param page copy %d: ", copy);
		print_text(pp + AF_ONFI_PARAM_MANUFACTURER, AF_ONFI_PARAM_MANUFACTURER_LEN);
		putchar(' ');
		print_text(pp + AF_ONFI_PARAM_MODEL, AF_ONFI_PARAM_MODEL_LEN);
		printf(", jedec %02x, ONFI rev 0x%04lx\n", pp[AF_ONFI_PARAM_JEDEC_ID],
		       (unsigned long)le(pp + AF_ONFI_PARAM_REVISION, 2));
		printf("  %lu+%lu B pages, %lu pages/block, %lu blocks/LUN, %u LUNs, %u bit/cell, "
		       "timing modes 0x%02lx, tR %lu us, tPROG %lu us, tBERS %lu us, tCCS %lu ns\n",
		       (unsigned long)le(pp + AF_ONFI_PARAM_PAGE_DATA, 4), (unsigned long)le(pp + AF_ONFI_PARAM_PAGE_SPARE, 2),
		       (unsigned long)le(pp + AF_ONFI_PARAM_PAGES_PER_BLOCK, 4),
		       (unsigned long)le(pp + AF_ONFI_PARAM_BLOCKS_PER_LUN, 4), pp[AF_ONFI_PARAM_LUNS],
		       pp[AF_ONFI_PARAM_BITS_PER_CELL], (unsigned long)le(pp + AF_ONFI_PARAM_TIMING_MODES, 2),
		       (unsigned long)le(pp + AF_ONFI_PARAM_T_R_US, 2), (unsigned long)le(pp + AF_ONFI_PARAM_T_PROG_US, 2),
		       (unsigned long)le(pp + AF_ONFI_PARAM_T_BERS_US, 2), (unsigned long)le(pp + AF_ONFI_PARAM_T_CCS_NS, 2));
	}
	return fails ? AF_EFAIL : AF_OK;
}

static void print_status(unsigned ch, unsigned way, uint8_t s)
{
	printf("ch %u way %u: status 0x%02x:%s%s%s%s\n", ch, way, s, (s >> AF_ONFISTATUS_RDY) & 1 ? " RDY" : " busy",
	       (s >> AF_ONFISTATUS_ARDY) & 1 ? " ARDY" : "", (s >> AF_ONFISTATUS_FAIL) & 1 ? " FAIL" : "",
	       (s >> AF_ONFISTATUS_WP_N) & 1 ? "" : " write-protected");
}

/* nand read <ch> <way> <block> <page> [oob]: one READ through the controller, timed. */
static int nand_read(int argc, char **argv)
{
	uint32_t v[4];
	int oob = argc == 7 && !strcmp(argv[6], "oob");
	if (argc != 6 && !oob)
		return AF_EUSAGE;
	for (int i = 0; i < 4; i++)
		if (af_parse_u32(argv[2 + i], &v[i]))
			return AF_EUSAGE;
	if (v[0] >= af_nand.channels || v[1] >= af_nand.ways || v[2] >= af_nand.blocks_per_lun * af_nand.luns ||
	    v[3] >= af_nand.pages_per_block) {
		printf("error: no such page (%lu channels, %lu ways, %lu blocks, %lu pages/block)\n",
		       (unsigned long)af_nand.channels, (unsigned long)af_nand.ways,
		       (unsigned long)(af_nand.blocks_per_lun * af_nand.luns), (unsigned long)af_nand.pages_per_block);
		return AF_EFAIL;
	}
	uint32_t ppa = af_nand_ppa(v[0], v[1], v[2] / af_nand.blocks_per_lun, v[2] % af_nand.blocks_per_lun, v[3]);
	uint8_t rec[AF_NAND_BBM_BYTES + AF_OOB_SIZE];
	af_nand_cpl_t c AF_NAND_ALIGNED;
	uint64_t t0 = af_uptime_cycles();
	int r = oob ? af_nand_read(ppa, af_nand.oob_col, af_nand.oob_bytes, NULL, 0, &c)
		    : af_nand_read(ppa, 0, af_nand.user_bytes, NULL, 0, &c);
	uint64_t dt = af_uptime_cycles() - t0;
	if (r < 0) {
		printf("error: READ: %s\n", af_nand_result_name(r));
		return AF_EFAIL;
	}
	af_nand_buf_read(v[0], af_nand_sync_slot(), af_nand.oob_col, rec, sizeof(rec));
	printf("%s, %u bits corrected (max %u per codeword), crc 0x%08lx, ", af_nand_result_name(r),
	       (unsigned)c.ecc_corrected, (unsigned)c.ecc_max, (unsigned long)c.crc);
	af_print_u64(dt);
	printf(" cycles\noob:");
	for (unsigned i = 0; i < sizeof(rec); i++)
		printf(" %02x", rec[i]);
	printf("\n");
	return AF_OK;
}

/* nand test <block>: ERASE, PROGRAM two pages with a pattern, READ them back
 * through ECC, ERASE again -- on a block the boot scan found free. */
#define TEST_PAGES 2

static uint32_t pattern(uint32_t block, uint32_t page, uint32_t off)
{
	uint32_t x = (block * 0x9e3779b9u) ^ (page * 0x85ebca6bu) ^ (off * 0xc2b2ae35u);
	return x ^ (x >> 15);
}

static int nand_test(int argc, char **argv)
{
	uint32_t b;
	if (argc != 3)
		return AF_EUSAGE;
	int err = parse_block(argv[2], &b);
	if (err)
		return err;
	af_block_t *x = &af_flash.blocks[b];
	if (x->flags || x->written || x->state == AF_BSTATE_CORE || x->state == AF_BSTATE_CKPT || x->anchor) {
		printf("error: block %lu is %s: only a free block is erased and programmed\n", (unsigned long)b,
		       x->flags ? "bad" : x->anchor ? "an anchor block" : x->state == AF_BSTATE_CKPT ? "a checkpoint area's"
		       : x->written ? "written" : "the FTL core's (open or queued)");
		return AF_EFAIL;
	}
	uint32_t ppa0 = af_nand_block_ppa(b);
	unsigned ch = AF_PPA_PPA_CHANNEL_GET(ppa0), slot = af_nand_sync_slot();
	af_nand_cpl_t c AF_NAND_ALIGNED;
	uint64_t t0 = af_uptime_cycles();
	int r = af_nand_erase(ppa0, &c);
	uint64_t t_erase = af_uptime_cycles() - t0;
	af_ftl_count_erase(b);
	/* until the test ends erased, the block is not known erased: whoever takes it next erases it first
	 * (and retires it if that erase fails) */
	x->needs_erase = 1;
	if (r != AF_NANDRESULT_OK) {
		printf("error: ERASE: %s (status 0x%02x)\n", af_nand_result_name(r), c.nand_status);
		return AF_EFAIL;
	}
	uint64_t t_prog = 0, t_read = 0;
	for (uint32_t pg = 0; pg < TEST_PAGES && pg < af_nand.pages_per_block; pg++) {
		uint32_t ppa = AF_PPA_PPA_PAGE_SET(ppa0, pg);
		for (uint32_t off = 0; off < af_nand.user_bytes; off += 4) {
			uint32_t w = off < af_nand.page_data ? pattern(b, pg, off) : 0xffffffffu; /* spare: BBM + OOB left FFh */
			af_nand_buf_write(ch, slot, off, &w, af_nand.user_bytes - off < 4 ? af_nand.user_bytes - off : 4);
		}
		t0 = af_uptime_cycles();
		r = af_nand_program(ppa, 0, NULL, af_nand.user_bytes, 0, &c);
		t_prog += af_uptime_cycles() - t0;
		uint32_t crc = c.crc;
		if (r != AF_NANDRESULT_OK) {
			printf("error: PROGRAM page %lu: %s (status 0x%02x)\n", (unsigned long)pg, af_nand_result_name(r),
			       c.nand_status);
			return AF_EFAIL;
		}
		t0 = af_uptime_cycles();
		r = af_nand_read(ppa, 0, af_nand.user_bytes, NULL, 0, &c);
		t_read += af_uptime_cycles() - t0;
		if (r != AF_NANDRESULT_OK || c.crc != crc) {
			printf("error: READ page %lu: %s, crc 0x%08lx (programmed 0x%08lx)\n", (unsigned long)pg,
			       af_nand_result_name(r), (unsigned long)c.crc, (unsigned long)crc);
			return AF_EFAIL;
		}
		for (uint32_t off = 0; off < af_nand.page_data; off += 4) {
			uint32_t w;
			af_nand_buf_read(ch, slot, off, &w, 4);
			if (w != pattern(b, pg, off)) {
				printf("error: page %lu byte %lu reads 0x%08lx, programmed 0x%08lx\n", (unsigned long)pg,
				       (unsigned long)off, (unsigned long)w, (unsigned long)pattern(b, pg, off));
				return AF_EFAIL;
			}
		}
	}
	r = af_nand_erase(ppa0, &c);
	af_ftl_count_erase(b);
	int r2 = r == AF_NANDRESULT_OK ? af_nand_read(ppa0, 0, af_nand.user_bytes, NULL, 0, &c) : r;
	if (r != AF_NANDRESULT_OK || r2 != AF_NANDRESULT_ERASED) {
		printf("error: second ERASE: %s, page 0 then reads %s\n", af_nand_result_name(r), af_nand_result_name(r2));
		return AF_EFAIL;
	}
	x->needs_erase = 0;
	printf("block %lu (", (unsigned long)b);
	af_nand_print_ppa(ppa0);
	printf("): erase ");
	af_print_u64(t_erase);
	printf(" cycles, %u pages programmed (", TEST_PAGES);
	af_print_u64(t_prog / TEST_PAGES);
	printf(" cycles each) and read back identical (");
	af_print_u64(t_read / TEST_PAGES);
	printf(" cycles each), erased again: pass\n");
	return AF_OK;
}

static int cmd_nand(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "read")) {
		if (!need_nand())
			return AF_EFAIL;
		return nand_read(argc, argv);
	}
	if (argc >= 2 && !strcmp(argv[1], "test"))
		return nand_test(argc, argv);
	if (argc != 2 || (strcmp(argv[1], "id") && strcmp(argv[1], "status") && strcmp(argv[1], "reset")))
		return AF_EUSAGE;
	if (!need_nand())
		return AF_EFAIL;
	if (!strcmp(argv[1], "id"))
		return nand_id();
	int fails = 0;
	if (!strcmp(argv[1], "status")) {
		for (unsigned t = 0; t < af_nand.targets; t++) {
			af_nand_cpl_t c AF_NAND_ALIGNED;
			int r = af_nand_read_status(t / af_nand.ways, t % af_nand.ways, &c);
			if (r != AF_NANDRESULT_OK) {
				printf("error: ch %lu way %lu: READ STATUS: %s\n", (unsigned long)(t / af_nand.ways),
				       (unsigned long)(t % af_nand.ways), af_nand_result_name(r));
				fails++;
			} else {
				print_status(t / af_nand.ways, t % af_nand.ways, c.nand_status);
			}
		}
		return fails ? AF_EFAIL : AF_OK;
	}
	af_nand_cpl_t cpls[16] AF_NAND_ALIGNED;
	int r = af_nand_reset_all(af_nand.targets <= 16 ? cpls : NULL);
	for (unsigned t = 0; t < af_nand.targets && t < 16; t++)
		print_status(t / af_nand.ways, t % af_nand.ways, cpls[t].nand_status);
	if (r != AF_NANDRESULT_OK) {
		printf("error: RESET: %s\n", af_nand_result_name(r));
		return AF_EFAIL;
	}
	printf("reset %lu targets; timing mode %d\n", (unsigned long)af_nand.targets, af_nand.mode);
	return AF_OK;
}
AF_COMMAND(nand, "nand id|status|reset|read <ch> <way> <block> <page> [oob]|test <block>",
	   "READ ID + parameter page / READ STATUS / RESET on every target; READ one page (timed); "
	   "ERASE + PROGRAM + READ back + ERASE a free block", cmd_nand);

static void print_block_addr(uint32_t b)
{
	uint32_t ppa = af_nand_block_ppa(b);
	printf("ch %lu way %lu lun %lu block %lu", (unsigned long)AF_PPA_PPA_CHANNEL_GET(ppa),
	       (unsigned long)AF_PPA_PPA_WAY_GET(ppa), (unsigned long)AF_PPA_PPA_LUN_GET(ppa),
	       (unsigned long)AF_PPA_PPA_BLOCK_GET(ppa));
}

static int cmd_bbt(int argc, char **argv)
{
	if (argc != 1)
		return AF_EUSAGE;
	if (!need_nand())
		return AF_EFAIL;
	if (!af_flash.blocks) {
		printf("error: no bad-block table (boot did not get that far)\n");
		return AF_EFAIL;
	}
	printf("%lu bad blocks of %lu (factory markers in page 0's first %u spare bytes, read at the first boot; "
	       "the table and grown ones kept in checkpoints; this boot: %s)\n", (unsigned long)af_flash.bad_blocks,
	       (unsigned long)af_flash.nblocks, (unsigned)AF_NAND_BBM_BYTES,
	       af_ckpt.bbt ? "from the checkpoint" : "markers read");
	for (uint32_t b = 0; b < af_flash.nblocks; b++) {
		if (!af_flash.blocks[b].flags)
			continue;
		printf("  block %lu (", (unsigned long)b);
		print_block_addr(b);
		const af_block_t *x = &af_flash.blocks[b];
		printf("): %s\n", x->flags & AF_BLOCK_BAD ? "factory bad"
				   : x->flags & AF_BLOCK_UNREADABLE ? "marker unreadable"
				   : x->retire ? "grown bad, retiring (GC moves its data)"
					       : "grown bad, retired");
	}
	return AF_OK;
}
AF_COMMAND(bbt, "bbt", "the bad-block table: factory bad blocks found at boot, grown ones since", cmd_bbt);

static void print_map_entry(uint32_t lba)
{
	const af_rec_map_t *m = &af_flash.map;
	printf("lba %lu: ", (unsigned long)lba);
	if (m->vseq[lba] == AF_REC_VSEQ_NONE) {
		printf("unbound\n");
		return;
	}
	printf("vseq ");
	af_print_u64(m->vseq[lba]);
	printf(", commit seq ");
	if (m->cseq[lba])
		af_print_u64(m->cseq[lba] - 1);
	else
		printf("checkpoint");
	if (m->ppa[lba] == AF_REC_PPA_NONE) {
		printf(", lost (no intact page holds it)\n");
		return;
	}
	printf(", ppa 0x%08lx (", (unsigned long)m->ppa[lba]);
	af_nand_print_ppa(m->ppa[lba]);
	printf(")\n");
}

/* The entry the FTL core serves now (through its map cache). */
static void print_live_entry(uint32_t lba)
{
	uint32_t ppa;
	int r = af_ftl_map(AF_MAPFWOP_READ, lba, 0, 0, &ppa);
	if (r < 0 || (r & AF_FTL_MAP_RESULT_ERROR)) {
		printf("  now: error reading the core's map\n");
		return;
	}
	if (ppa == AF_PPA_UNMAPPED) {
		printf("  now: unbound\n");
		return;
	}
	printf("  now: ppa 0x%08lx (", (unsigned long)ppa);
	af_nand_print_ppa(ppa);
	printf(")\n");
}

#define MAP_MAX_COUNT 256

/* `map load [pause | resume | all]`: the lazily loaded map (mapload.h). */
static int map_load(int argc, char **argv)
{
	af_mapload_t *ml = &af_mapload;
	if (argc == 3) {
		if (!strcmp(argv[2], "pause"))
			ml->paused = 1;
		else if (!strcmp(argv[2], "resume"))
			ml->paused = 0;
		else if (!strcmp(argv[2], "all"))
			af_map_load_all();
		else
			return AF_EUSAGE;
	}
	printf("map: the table at 0x%08lx, %lu entries of 4 bytes\n", (unsigned long)(uintptr_t)af_flash.map.ppa,
	       (unsigned long)af_flash.map.nlba);
	if (!af_ckpt.loaded || !ml->nseg) {
		printf("map: loaded whole at boot (%s)\n", af_ckpt.loaded ? "the checkpoint's format needs it" : "no checkpoint");
		return AF_OK;
	}
	printf("map: %lu of %lu segments of %lu LBAs loaded%s: %lu for recovery at boot, %lu for waiting requests, "
	       "the rest in the background%s; %lu map pages did not read or check\n",
	       (unsigned long)(ml->nseg - ml->left), (unsigned long)ml->nseg, (unsigned long)(1u << ml->seg_shift),
	       ml->left ? "" : " (done)", (unsigned long)ml->at_boot, (unsigned long)ml->on_demand,
	       ml->paused ? " (paused)" : "", (unsigned long)ml->page_errors);
	if (ml->kept)
		printf("map: %lu entries were written before their segment loaded (kept; the gate should have held "
		       "their writers)\n", (unsigned long)ml->kept);
#ifdef AFCTRL_FTL
	if (af_ftl.running)
		printf("map: %lu host or firmware requests waited for a segment\n",
		       (unsigned long)ftl_rd(AF_FTL_MAP_FAULTS));
#endif
	return AF_OK;
}

static int cmd_map(int argc, char **argv)
{
	uint32_t lba, count = 1;
	if (argc >= 2 && argc <= 3 && !strcmp(argv[1], "load"))
		return map_load(argc, argv);
	if (argc < 2 || argc > 3 || af_parse_u32(argv[1], &lba) || (argc == 3 && af_parse_u32(argv[2], &count)))
		return AF_EUSAGE;
	if (count == 0 || count > MAP_MAX_COUNT) {
		printf("error: count %lu out of range (1..%u)\n", (unsigned long)count, MAP_MAX_COUNT);
		return AF_EFAIL;
	}
	if (!need_scan())
		return AF_EFAIL;
	if (lba >= af_flash.nlba || count > af_flash.nlba - lba) {
		printf("error: lba %lu%s out of range (0..%lu)\n", (unsigned long)lba, count > 1 ? " + count" : "",
		       (unsigned long)(af_flash.nlba - 1));
		return AF_EFAIL;
	}
	for (uint32_t i = 0; i < count; i++) {
		/* the first line is what recovery found at boot (vseq, commit point) */
		af_map_need(lba + i);
		print_map_entry(lba + i);
		if (af_ftl.running && lba + i < af_ftl.capacity)
			print_live_entry(lba + i);
	}
	return AF_OK;
}
AF_COMMAND(map, "map <lba> [count] | map load [pause | resume | all]",
	   "map entries: recovered at boot (version, commit point, page), and the FTL core's now (count: up to 256 "
	   "LBAs); `load`: the lazily loaded map (segments in memory; pause or resume the background loader, or "
	   "load the rest now)",
	   cmd_map);

static int cmd_block(int argc, char **argv)
{
	uint32_t b;
	if (argc != 2)
		return AF_EUSAGE;
	int err = parse_block(argv[1], &b);
	if (err)
		return err;
	const af_block_t *x = &af_flash.blocks[b];
	const char *state = x->flags & AF_BLOCK_BAD ? "bad (factory)"
			    : x->flags & AF_BLOCK_UNREADABLE ? "bad (marker unreadable)"
			    : x->retire ? "retiring (a program failed; GC moves its data)"
			    : x->flags ? "retired (grown bad)"
			    : x->anchor && af_anchor.found ? "anchor (boot records)"
			    : x->state == AF_BSTATE_CORE ? "the FTL core's (open or queued)"
			    : x->written == 0 ? "free"
			    : x->written < af_nand.pages_per_block ? "open"
								  : "full";
	/* valid pages: the core's count once it runs (recovery's before) */
	uint32_t valid = x->valid;
	if (af_ftl.running && AF_PPA_PPA_LUN_GET(af_nand_block_ppa(b)) == 0) {
		af_dcache_invalidate();
		valid = af_ftl_valid_of(b);
	}
	printf("block %lu (", (unsigned long)b);
	print_block_addr(b);
	if (x->anchor && af_anchor.found && !x->flags) {
		/* its pages are records, not the log's: the anchor says where it stands */
		printf("): anchor (boot records; the next in block %lu, page %lu of %lu), %lu erases\n",
		       (unsigned long)af_anchor.block[af_anchor.cur], (unsigned long)af_anchor.next_page,
		       (unsigned long)af_anchor_usable_pages(), (unsigned long)x->erases);
		return AF_OK;
	}
	printf("): %s, %lu of %lu pages written, %lu torn, %lu valid%s, %lu erases\n", state, (unsigned long)x->written,
	       (unsigned long)af_nand.pages_per_block, (unsigned long)x->torn, (unsigned long)valid,
	       af_flash.planned[b] == 1 ? " (in the anchor's plan)" : "", (unsigned long)x->erases);
	return AF_OK;
}
AF_COMMAND(block, "block <n>", "a block's state and valid page count (n: global block number, see bbt)", cmd_block);
