/* atomflash firmware: NAND controller driver (see nand.h). */
#include <stdio.h>
#include <string.h>

#include "nand.h"

af_nand_info_t af_nand = { .mode = -1 };

#ifdef AFNAND_BASE

/* Most targets the driver keeps identities for (GEOMETRY allows 255 x 255;
 * a build with more targets is refused at init). */
#define MAX_TARGETS 16
static af_nand_target_t targets[MAX_TARGETS];

/* Completions collected while waiting, returned by af_nand_poll()/af_nand_wait():
 * a ring, oldest at cq_head (af_nand_wait may take one from the middle). */
#define CQ_SIZE 64
#define CPL_WORDS ((sizeof(af_nand_cpl_t) + 3) / 4)
#define DESC_WORDS ((sizeof(af_nand_desc_t) + 3) / 4)
static union {
	af_nand_cpl_t c;
	uint32_t w[CPL_WORDS];
} cq[CQ_SIZE];
static unsigned cq_head, cq_n;
static uint32_t inflight;
static uint16_t sync_tag = AF_NAND_TAG_SYNC;
/* What the DESC register holds (it keeps its contents): only changed words are written. */
static uint32_t desc_shadow[DESC_WORDS];

/* Polls of STATUS before a wait gives up: far beyond the slowest operation
 * (tBERS of a realistic part is 0.7 ms; one poll is tens of cycles). */
#define SPIN_LIMIT 2000000u

static inline uint32_t rd(uint32_t off)
{
	return *(volatile uint32_t *)(AFNAND_BASE + off);
}
static inline void wr(uint32_t off, uint32_t v)
{
	*(volatile uint32_t *)(AFNAND_BASE + off) = v;
}

int af_nand_present(void)
{
	return rd(AFNAND_REG_ID) == AFNAND_BLOCK_ID;
}

int af_nand_init(void)
{
	if (!af_nand_present())
		return AF_NAND_ENODEV;
	uint32_t g = rd(AFNAND_REG_GEOMETRY);
	af_nand.block_version = rd(AFNAND_REG_VERSION);
	af_nand.channels = g & 0xff;
	af_nand.ways = (g >> 8) & 0xff;
	af_nand.slots = (g >> 16) & 0xff;
	af_nand.ecc = (g >> 24) & 1;
	af_nand.slot_bytes = rd(AFNAND_REG_SLOT);
	af_nand.buf_stride = rd(AFNAND_REG_BUF_STRIDE);
	af_nand.fw_slot = rd(AFNAND_REG_FW_SLOT);
	af_nand.targets = af_nand.channels * af_nand.ways;
	if (af_nand.targets == 0 || af_nand.targets > MAX_TARGETS || af_nand.slots < 2 || af_nand.fw_slot >= af_nand.slots)
		return AF_NAND_ENODEV;
	/* drop whatever a previous run left behind */
	wr(AFNAND_REG_CTRL, 1u << AFNAND_CTRL_CLEAR_FAULT);
	cq_head = cq_n = 0;
	inflight = 0;
	for (unsigned i = 0; i < DESC_WORDS; i++)
		desc_shadow[i] = rd(AFNAND_REG_DESC + 4 * i);
	return 0;
}

const af_nand_target_t *af_nand_target(unsigned t)
{
	return t < af_nand.targets && t < MAX_TARGETS ? &targets[t] : NULL;
}

/* --- descriptors and completions ------------------------------------------------ */

/* Pop every completion the bridge holds into the software queue. */
static void collect(void)
{
	while (cq_n < CQ_SIZE && (rd(AFNAND_REG_STATUS) >> AFNAND_STATUS_CPL_VALID) & 1) {
		uint32_t *w = cq[(cq_head + cq_n) % CQ_SIZE].w;
		for (unsigned i = 0; i < CPL_WORDS; i++)
			w[i] = rd(AFNAND_REG_CPL + 4 * i);
		wr(AFNAND_REG_CTRL, 1u << AFNAND_CTRL_POP);
		cq_n++;
	}
}

int af_nand_submit(const af_nand_desc_t *d)
{
	union {
		af_nand_desc_t d AF_NAND_ALIGNED;
		uint32_t w[DESC_WORDS];
	} u;
	const uint32_t *w = (const uint32_t *)d;
	unsigned spin = 0;
	_Static_assert(sizeof(af_nand_desc_t) == 4 * DESC_WORDS, "descriptor is whole words");
	if ((uintptr_t)d & 3) { /* callers normally pass an aligned descriptor: no copy */
		memcpy(&u.d, d, sizeof(*d));
		w = u.w;
	}
	while ((rd(AFNAND_REG_STATUS) >> AFNAND_STATUS_DESC_PENDING) & 1) {
		collect();
		if (++spin > SPIN_LIMIT)
			return AF_NAND_ETIMEOUT;
	}
	for (unsigned i = 0; i < DESC_WORDS; i++)
		if (w[i] != desc_shadow[i]) {
			wr(AFNAND_REG_DESC + 4 * i, w[i]);
			desc_shadow[i] = w[i];
		}
	wr(AFNAND_REG_CTRL, 1u << AFNAND_CTRL_PUSH);
	inflight++;
	return 0;
}

/* Remove entry k (0 = oldest) of the queue. */
static void take(unsigned k, af_nand_cpl_t *out)
{
	unsigned i = (cq_head + k) % CQ_SIZE;
	if (out)
		memcpy(out, &cq[i].c, sizeof(*out));
	if (k == 0) {
		cq_head = (cq_head + 1) % CQ_SIZE;
	} else {
		for (; k + 1 < cq_n; k++) { /* close the gap */
			unsigned a = (cq_head + k) % CQ_SIZE, b = (a + 1) % CQ_SIZE;
			cq[a] = cq[b];
		}
	}
	cq_n--;
	inflight--;
}

int af_nand_poll(af_nand_cpl_t *out)
{
	if (cq_n == 0)
		collect();
	if (cq_n == 0)
		return 0;
	take(0, out);
	return 1;
}

int af_nand_wait(uint16_t tag, af_nand_cpl_t *out)
{
	for (unsigned spin = 0; spin < SPIN_LIMIT; spin++) {
		for (unsigned k = 0; k < cq_n; k++)
			if (cq[(cq_head + k) % CQ_SIZE].c.tag == tag) {
				take(k, out);
				return 0;
			}
		collect();
	}
	return AF_NAND_ETIMEOUT;
}

/* The tag for the next synchronous operation (they take turns through AF_NAND_TAG_SYNC..LIMIT-1). */
static uint16_t next_sync_tag(void)
{
	uint16_t t = sync_tag;
	sync_tag = (uint16_t)(sync_tag == AF_NAND_TAG_LIMIT - 1u ? AF_NAND_TAG_SYNC : sync_tag + 1u);
	return t;
}

int af_nand_exec(af_nand_desc_t *d, af_nand_cpl_t *out)
{
	af_nand_cpl_t c AF_NAND_ALIGNED;
	d->tag = next_sync_tag();
	int r = af_nand_submit(d);
	if (r == 0)
		r = af_nand_wait(d->tag, &c);
	if (r < 0)
		return r;
	if (out)
		*out = c;
	return c.result;
}

uint32_t af_nand_inflight(void)
{
	return inflight;
}

/* --- page buffers --------------------------------------------------------------- */

static inline uint32_t slot_addr(unsigned ch, unsigned slot)
{
	return AFNAND_REG_BUF + ch * af_nand.buf_stride + slot * af_nand.slot_bytes;
}

const volatile uint32_t *af_nand_buf_words(unsigned ch, unsigned slot)
{
	return (const volatile uint32_t *)(AFNAND_BASE + slot_addr(ch, slot));
}

void af_nand_buf_read(unsigned ch, unsigned slot, unsigned off, void *dst, unsigned len)
{
	uint32_t base = slot_addr(ch, slot) + off;
	uint8_t *p = dst;
	while (len && (base & 3)) {
		uint32_t w = rd(base & ~3u);
		*p++ = (uint8_t)(w >> (8 * (base & 3)));
		base++;
		len--;
	}
	if (((uintptr_t)p & 3) == 0) {
		for (; len >= 4; len -= 4, base += 4, p += 4)
			*(uint32_t *)p = rd(base);
	} else {
		for (; len >= 4; len -= 4, base += 4, p += 4) {
			uint32_t w = rd(base);
			memcpy(p, &w, 4);
		}
	}
	if (len) {
		uint32_t w = rd(base);
		memcpy(p, &w, len);
	}
}

void af_nand_buf_write(unsigned ch, unsigned slot, unsigned off, const void *src, unsigned len)
{
	uint32_t base = slot_addr(ch, slot) + off;
	const uint8_t *p = src;
	while (len && (base & 3)) { /* byte lanes: the page buffer honours byte enables */
		*(volatile uint8_t *)(AFNAND_BASE + base) = *p++;
		base++;
		len--;
	}
	if (((uintptr_t)p & 3) == 0) {
		for (; len >= 4; len -= 4, base += 4, p += 4)
			wr(base, *(const uint32_t *)p);
	} else {
		for (; len >= 4; len -= 4, base += 4, p += 4) {
			uint32_t w;
			memcpy(&w, p, 4);
			wr(base, w);
		}
	}
	while (len--) {
		*(volatile uint8_t *)(AFNAND_BASE + base) = *p++;
		base++;
	}
}

unsigned af_nand_sync_slot(void)
{
	return af_nand.fw_slot;
}

/* --- addresses ------------------------------------------------------------------ */

uint32_t af_nand_ppa(unsigned ch, unsigned way, unsigned lun, unsigned block, unsigned page)
{
	uint32_t v = 0;
	v = AF_PPA_PPA_CHANNEL_SET(v, (uint32_t)ch);
	v = AF_PPA_PPA_WAY_SET(v, (uint32_t)way);
	v = AF_PPA_PPA_LUN_SET(v, (uint32_t)lun);
	v = AF_PPA_PPA_BLOCK_SET(v, (uint32_t)block);
	v = AF_PPA_PPA_PAGE_SET(v, (uint32_t)page);
	return v;
}

uint32_t af_nand_block_of(uint32_t ppa)
{
	uint32_t t = AF_PPA_PPA_CHANNEL_GET(ppa) * af_nand.ways + AF_PPA_PPA_WAY_GET(ppa);
	return (t * af_nand.luns + AF_PPA_PPA_LUN_GET(ppa)) * af_nand.blocks_per_lun + AF_PPA_PPA_BLOCK_GET(ppa);
}

uint32_t af_nand_block_ppa(uint32_t gblock)
{
	uint32_t block = gblock % af_nand.blocks_per_lun;
	uint32_t rest = gblock / af_nand.blocks_per_lun;
	uint32_t lun = rest % af_nand.luns, t = rest / af_nand.luns;
	return af_nand_ppa(t / af_nand.ways, t % af_nand.ways, lun, block, 0);
}

void af_nand_print_ppa(uint32_t ppa)
{
	printf("ch %lu way %lu lun %lu block %lu page %lu", (unsigned long)AF_PPA_PPA_CHANNEL_GET(ppa),
	       (unsigned long)AF_PPA_PPA_WAY_GET(ppa), (unsigned long)AF_PPA_PPA_LUN_GET(ppa),
	       (unsigned long)AF_PPA_PPA_BLOCK_GET(ppa), (unsigned long)AF_PPA_PPA_PAGE_GET(ppa));
}

void af_nand_desc_init(af_nand_desc_t *d, unsigned opcode, uint32_t ppa)
{
	memset(d, 0, sizeof(*d));
	d->opcode = (uint8_t)opcode;
	d->channel = (uint8_t)AF_PPA_PPA_CHANNEL_GET(ppa);
	d->target = (uint8_t)AF_PPA_PPA_WAY_GET(ppa);
	d->lun = (uint8_t)AF_PPA_PPA_LUN_GET(ppa);
	d->block = AF_PPA_PPA_BLOCK_GET(ppa);
	d->page = (uint16_t)AF_PPA_PPA_PAGE_GET(ppa);
}

/* --- operations ------------------------------------------------------------------ */

static int simple_op(unsigned opcode, unsigned ch, unsigned way, af_nand_cpl_t *cpl)
{
	af_nand_desc_t d AF_NAND_ALIGNED;
	af_nand_desc_init(&d, opcode, af_nand_ppa(ch, way, 0, 0, 0));
	d.slot = (uint16_t)af_nand_sync_slot();
	return af_nand_exec(&d, cpl);
}

int af_nand_reset(unsigned ch, unsigned way, af_nand_cpl_t *cpl)
{
	return simple_op(AF_NANDOP_RESET, ch, way, cpl);
}

int af_nand_read_status(unsigned ch, unsigned way, af_nand_cpl_t *cpl)
{
	return simple_op(AF_NANDOP_READ_STATUS, ch, way, cpl);
}

int af_nand_read_id(unsigned ch, unsigned way, unsigned addr, uint8_t *buf, unsigned len)
{
	af_nand_desc_t d AF_NAND_ALIGNED;
	af_nand_desc_init(&d, AF_NANDOP_READ_ID, af_nand_ppa(ch, way, 0, 0, 0));
	d.column = (uint16_t)addr;
	d.length = (uint16_t)len;
	d.slot = (uint16_t)af_nand_sync_slot();
	int r = af_nand_exec(&d, NULL);
	if (r == AF_NANDRESULT_OK)
		af_nand_buf_read(ch, d.slot, 0, buf, len);
	return r;
}

/* ONFI's CRC-16 (MSB first), a nibble at a time from a 16-entry table made on first use: the bit-serial
 * loop took ~35 k cycles per parameter page, a seventh of the boot's NAND bring-up. */
static uint16_t onfi_crc16(const uint8_t *p, unsigned n)
{
	static uint16_t table[16];
	if (!table[1])
		for (unsigned v = 0; v < 16; v++) {
			uint16_t c = (uint16_t)(v << 12);
			for (int b = 0; b < 4; b++)
				c = (c & 0x8000) ? (uint16_t)((c << 1) ^ AF_ONFI_PARAM_CRC_POLY) : (uint16_t)(c << 1);
			table[v] = c;
		}
	uint16_t crc = AF_ONFI_PARAM_CRC_INIT;
	for (unsigned i = 0; i < n; i++) {
		crc = (uint16_t)((crc << 4) ^ table[(crc >> 12) ^ (p[i] >> 4)]);
		crc = (uint16_t)((crc << 4) ^ table[(crc >> 12) ^ (p[i] & 15)]);
	}
	return crc;
}

static uint32_t le(const uint8_t *p, unsigned n)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

int af_nand_read_param(unsigned ch, unsigned way, uint8_t *buf)
{
	af_nand_desc_t d AF_NAND_ALIGNED;
	af_nand_desc_init(&d, AF_NANDOP_READ_PARAM, af_nand_ppa(ch, way, 0, 0, 0));
	unsigned copies = AF_ONFI_PARAM_COPIES;
	while (copies > 1 && copies * AF_ONFI_PARAM_PAGE_BYTES > af_nand.slot_bytes)
		copies--;
	d.length = (uint16_t)(copies * AF_ONFI_PARAM_PAGE_BYTES);
	d.slot = (uint16_t)af_nand_sync_slot();
	int r = af_nand_exec(&d, NULL);
	if (r != AF_NANDRESULT_OK)
		return r < 0 ? r : AF_NAND_EGEOMETRY;
	for (unsigned c = 0; c < copies; c++) {
		af_nand_buf_read(ch, d.slot, c * AF_ONFI_PARAM_PAGE_BYTES, buf, AF_ONFI_PARAM_PAGE_BYTES);
		if (le(buf + AF_ONFI_PARAM_SIGNATURE, 4) == AF_ONFI_PARAM_SIGNATURE_VALUE &&
		    le(buf + AF_ONFI_PARAM_CRC, 2) == onfi_crc16(buf, AF_ONFI_PARAM_CRC))
			return (int)c;
	}
	return AF_NAND_EGEOMETRY;
}

static uint32_t timing_word(int mode, unsigned w)
{
#define TW(m)                                                                                   \
	{ AFNAND_TIMING_M##m##_W0, AFNAND_TIMING_M##m##_W1, AFNAND_TIMING_M##m##_W2,            \
	  AFNAND_TIMING_M##m##_W3, AFNAND_TIMING_M##m##_W4, AFNAND_TIMING_M##m##_W5,            \
	  AFNAND_TIMING_M##m##_W6 }
	/* rows of modes AFNAND_TIMING_MODES does not offer are zeros, never written */
#if (AFNAND_TIMING_BYTES + 3) / 4 != 7
#error "timing register block changed size: update TW()"
#endif
	static const uint32_t table[][7] = { TW(0), TW(1), TW(2), TW(3), TW(4), TW(5) };
	return table[mode][w];
#undef TW
}

int af_nand_set_timing_mode(int mode)
{
	if (mode < 0 || mode > 5 || !((AFNAND_TIMING_MODES >> mode) & 1))
		return AF_NAND_EGEOMETRY;
	/* Every target switches first (SET FEATURES runs at the current timing), then the controller. */
	for (unsigned t = 0; t < af_nand.targets; t++) {
		unsigned ch = t / af_nand.ways, way = t % af_nand.ways;
		uint8_t p[4] = { (uint8_t)mode, 0, 0, 0 };
		af_nand_desc_t d AF_NAND_ALIGNED;
		af_nand_desc_init(&d, AF_NANDOP_SET_FEATURES, af_nand_ppa(ch, way, 0, 0, 0));
		d.column = AF_ONFIFEATURE_TIMING_MODE;
		d.length = 4;
		d.slot = (uint16_t)af_nand_sync_slot();
		af_nand_buf_write(ch, d.slot, 0, p, 4);
		int r = af_nand_exec(&d, NULL);
		if (r != AF_NANDRESULT_OK)
			return r < 0 ? r : AF_NAND_EGEOMETRY;
	}
	for (unsigned w = 0; w < (AFNAND_TIMING_BYTES + 3) / 4; w++)
		wr(AFNAND_REG_TIMING + 4 * w, timing_word(mode, w));
	af_nand.mode = mode;
	return 0;
}

int af_nand_read(uint32_t ppa, unsigned col, unsigned len, void *buf, unsigned flags, af_nand_cpl_t *cpl)
{
	af_nand_desc_t d AF_NAND_ALIGNED;
	af_nand_desc_init(&d, AF_NANDOP_READ, ppa);
	d.flags = (uint8_t)flags;
	d.column = (uint16_t)col;
	d.length = (uint16_t)len;
	d.slot = (uint16_t)af_nand_sync_slot();
	int r = af_nand_exec(&d, cpl);
	if (buf && (r == AF_NANDRESULT_OK || r == AF_NANDRESULT_ERASED || r == AF_NANDRESULT_UNCORRECTABLE))
		af_nand_buf_read(d.channel, d.slot, col, buf, len);
	return r;
}

int af_nand_program(uint32_t ppa, unsigned col, const void *buf, unsigned len, unsigned flags, af_nand_cpl_t *cpl)
{
	af_nand_desc_t d AF_NAND_ALIGNED;
	af_nand_desc_init(&d, AF_NANDOP_PROGRAM, ppa);
	d.flags = (uint8_t)flags;
	d.column = (uint16_t)col;
	d.length = (uint16_t)len;
	d.slot = (uint16_t)af_nand_sync_slot();
	if (buf)
		af_nand_buf_write(d.channel, d.slot, col, buf, len);
	return af_nand_exec(&d, cpl);
}

int af_nand_erase(uint32_t ppa, af_nand_cpl_t *cpl)
{
	af_nand_desc_t d AF_NAND_ALIGNED;
	af_nand_desc_init(&d, AF_NANDOP_ERASE, ppa);
	d.slot = (uint16_t)af_nand_sync_slot();
	return af_nand_exec(&d, cpl);
}

void af_nand_erase_many(const uint32_t *ppa, int *result, unsigned n)
{
	uint16_t tag[n ? n : 1];
	for (unsigned i = 0; i < n; i++) {
		af_nand_desc_t d AF_NAND_ALIGNED;
		af_nand_desc_init(&d, AF_NANDOP_ERASE, ppa[i]);
		d.slot = (uint16_t)af_nand_sync_slot();
		d.tag = tag[i] = next_sync_tag();
		result[i] = af_nand_submit(&d);
	}
	for (unsigned i = 0; i < n; i++) {
		af_nand_cpl_t c AF_NAND_ALIGNED;
		if (result[i] == 0)
			result[i] = af_nand_wait(tag[i], &c) < 0 ? AF_NAND_ETIMEOUT : c.result;
	}
}

int af_nand_reset_all(af_nand_cpl_t *cpls)
{
	int mode = af_nand.mode, worst = AF_NANDRESULT_OK;
	for (unsigned t = 0; t < af_nand.targets; t++) {
		int r = af_nand_reset(t / af_nand.ways, t % af_nand.ways, cpls ? &cpls[t] : NULL);
		if (r != AF_NANDRESULT_OK && worst == AF_NANDRESULT_OK)
			worst = r;
	}
	/* RESET puts the targets back in timing mode 0: follow them, then switch again. */
	for (unsigned w = 0; w < (AFNAND_TIMING_BYTES + 3) / 4; w++)
		wr(AFNAND_REG_TIMING + 4 * w, timing_word(0, w));
	af_nand.mode = 0;
	if (worst == AF_NANDRESULT_OK && mode > 0) {
		int r = af_nand_set_timing_mode(mode);
		if (r < 0)
			return r;
	}
	return worst;
}

/* --- bring-up ----------------------------------------------------------------------- */

static void copy_text(char *dst, const uint8_t *src, unsigned n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
	for (int i = (int)n - 1; i >= 0 && (dst[i] == ' ' || dst[i] == 0); i--)
		dst[i] = 0;
	for (unsigned i = 0; dst[i]; i++)
		if (dst[i] < 0x20 || dst[i] > 0x7e)
			dst[i] = '?';
}

int af_nand_bringup(int max_mode)
{
	static uint8_t pp[AF_ONFI_PARAM_PAGE_BYTES];
	af_nand.up = 0;
	af_nand.mode = -1;
	int r = af_nand_init();
	if (r < 0) {
		printf("nand: no NAND controller in this build\n");
		return r;
	}
	/* Mode 0 on the controller side: after RESET (and at power-on) every target runs mode 0. */
	for (unsigned w = 0; w < (AFNAND_TIMING_BYTES + 3) / 4; w++)
		wr(AFNAND_REG_TIMING + 4 * w, timing_word(0, w));
	af_nand.mode = 0;
	/* RESET every target (they run in parallel: submit all, then collect). */
	for (unsigned t = 0; t < af_nand.targets; t++) {
		af_nand_desc_t d AF_NAND_ALIGNED;
		af_nand_desc_init(&d, AF_NANDOP_RESET, af_nand_ppa(t / af_nand.ways, t % af_nand.ways, 0, 0, 0));
		d.tag = (uint16_t)t;
		if (af_nand_submit(&d) < 0) {
			printf("error: nand: controller does not take descriptors\n");
			return AF_NAND_ETIMEOUT;
		}
	}
	for (unsigned t = 0; t < af_nand.targets; t++) {
		af_nand_cpl_t c AF_NAND_ALIGNED;
		if (af_nand_wait((uint16_t)t, &c) < 0) {
			printf("error: nand: RESET of target %u timed out\n", t);
			return AF_NAND_ETIMEOUT;
		}
		targets[t].status = c.nand_status;
		if (c.result != AF_NANDRESULT_OK) {
			printf("error: nand: RESET of target %u: %s\n", t, af_nand_result_name(c.result));
			return AF_NAND_EGEOMETRY;
		}
	}
	/* READ ID, parameter page: every target must be an ONFI part with the same geometry. */
	for (unsigned t = 0; t < af_nand.targets; t++) {
		unsigned ch = t / af_nand.ways, way = t % af_nand.ways;
		uint8_t sig[4];
		r = af_nand_read_id(ch, way, 0x00, targets[t].id, AF_NAND_ID_LEN);
		if (r == AF_NANDRESULT_OK)
			r = af_nand_read_id(ch, way, 0x20, sig, 4);
		if (r != AF_NANDRESULT_OK) {
			printf("error: nand: READ ID of ch %u way %u: %s\n", ch, way, af_nand_result_name(r));
			return AF_NAND_EGEOMETRY;
		}
		targets[t].onfi = le(sig, 4) == AF_ONFI_PARAM_SIGNATURE_VALUE;
		int copy = af_nand_read_param(ch, way, pp);
		targets[t].param_ok = copy >= 0;
		if (copy < 0) {
			printf("error: nand: ch %u way %u: no valid ONFI parameter page\n", ch, way);
			return AF_NAND_EGEOMETRY;
		}
		uint32_t page_data = le(pp + AF_ONFI_PARAM_PAGE_DATA, 4);
		uint32_t page_spare = le(pp + AF_ONFI_PARAM_PAGE_SPARE, 2);
		uint32_t ppb = le(pp + AF_ONFI_PARAM_PAGES_PER_BLOCK, 4);
		uint32_t bpl = le(pp + AF_ONFI_PARAM_BLOCKS_PER_LUN, 4);
		uint32_t luns = pp[AF_ONFI_PARAM_LUNS];
		if (t == 0) {
			af_nand.param_copy = (uint8_t)copy;
			af_nand.page_data = page_data;
			af_nand.page_spare = page_spare;
			af_nand.pages_per_block = ppb;
			af_nand.blocks_per_lun = bpl;
			af_nand.luns = luns;
			af_nand.bits_per_cell = pp[AF_ONFI_PARAM_BITS_PER_CELL];
			af_nand.timing_modes = le(pp + AF_ONFI_PARAM_TIMING_MODES, 2);
			af_nand.t_prog_us = le(pp + AF_ONFI_PARAM_T_PROG_US, 2);
			af_nand.t_bers_us = le(pp + AF_ONFI_PARAM_T_BERS_US, 2);
			af_nand.t_r_us = le(pp + AF_ONFI_PARAM_T_R_US, 2);
			af_nand.t_ccs_ns = le(pp + AF_ONFI_PARAM_T_CCS_NS, 2);
			af_nand.onfi_revision = le(pp + AF_ONFI_PARAM_REVISION, 2);
			af_nand.endurance = pp[AF_ONFI_PARAM_ENDURANCE_VALUE];
			for (unsigned e = pp[AF_ONFI_PARAM_ENDURANCE_EXPONENT]; e && af_nand.endurance < 100000000u; e--)
				af_nand.endurance *= 10;
			copy_text(af_nand.manufacturer, pp + AF_ONFI_PARAM_MANUFACTURER, AF_ONFI_PARAM_MANUFACTURER_LEN);
			copy_text(af_nand.model, pp + AF_ONFI_PARAM_MODEL, AF_ONFI_PARAM_MODEL_LEN);
		} else if (page_data != af_nand.page_data || page_spare != af_nand.page_spare ||
			   ppb != af_nand.pages_per_block || bpl != af_nand.blocks_per_lun || luns != af_nand.luns) {
			printf("error: nand: ch %u way %u reports a different geometry than ch 0 way 0\n", ch, way);
			return AF_NAND_EGEOMETRY;
		} else {
			af_nand.timing_modes &= le(pp + AF_ONFI_PARAM_TIMING_MODES, 2);
		}
	}
	/* Can the controller serve this part?  With ECC its page layout is fixed
	 * at elaboration: the slot is exactly one page (data + spare). */
	af_nand.oob_col = af_nand.page_data;
	af_nand.oob_bytes = AF_NAND_BBM_BYTES + AF_OOB_SIZE;
	af_nand.user_bytes = af_nand.page_data + af_nand.oob_bytes;
	af_nand.blocks = af_nand.targets * af_nand.luns * af_nand.blocks_per_lun;
	af_nand.pages = af_nand.blocks * af_nand.pages_per_block;
	uint32_t page_bytes = af_nand.page_data + af_nand.page_spare;
	if (af_nand.page_data == 0 || af_nand.page_data % AF_ECC_CODEWORD || af_nand.pages_per_block == 0 ||
	    af_nand.blocks_per_lun == 0 || af_nand.luns == 0 || page_bytes != af_nand.slot_bytes ||
	    af_nand.pages_per_block > AF_PPA_PPA_PAGE_MASK + 1 ||
	    af_nand.blocks_per_lun > (AF_PPA_PPA_BLOCK_MASK >> AF_PPA_PPA_BLOCK_SHIFT) + 1 ||
	    af_nand.luns > (AF_PPA_PPA_LUN_MASK >> AF_PPA_PPA_LUN_SHIFT) + 1) {
		printf("error: nand: device geometry %lu+%lu B x %lu pages x %lu blocks x %lu LUNs does not fit the "
		       "controller (slot %lu B)\n", (unsigned long)af_nand.page_data, (unsigned long)af_nand.page_spare,
		       (unsigned long)af_nand.pages_per_block, (unsigned long)af_nand.blocks_per_lun,
		       (unsigned long)af_nand.luns, (unsigned long)af_nand.slot_bytes);
		return AF_NAND_EGEOMETRY;
	}
	/* Fastest timing mode every target and the build support. */
	int best = -1;
	for (int m = 0; m <= max_mode && m <= 5; m++)
		if (((af_nand.timing_modes & AFNAND_TIMING_MODES) >> m) & 1)
			best = m;
	if (best > 0 && (r = af_nand_set_timing_mode(best)) < 0) {
		printf("error: nand: switching to timing mode %d failed (%d)\n", best, r);
		return r;
	}
	af_nand.up = 1;
	return 0;
}

const char *af_nand_result_name(int r)
{
	switch (r) {
	case AF_NAND_ENODEV: return "no controller";
	case AF_NAND_ETIMEOUT: return "timeout";
	case AF_NAND_EGEOMETRY: return "bad geometry";
	default: return r >= 0 ? af_nandresult_name((unsigned)r) : "error";
	}
}

#else /* no NAND controller in this build */

int af_nand_present(void) { return 0; }
int af_nand_init(void) { return AF_NAND_ENODEV; }
const af_nand_target_t *af_nand_target(unsigned t) { return NULL; }
int af_nand_submit(const af_nand_desc_t *d) { return AF_NAND_ENODEV; }
int af_nand_poll(af_nand_cpl_t *out) { return 0; }
int af_nand_wait(uint16_t tag, af_nand_cpl_t *out) { return AF_NAND_ENODEV; }
int af_nand_exec(af_nand_desc_t *d, af_nand_cpl_t *out) { return AF_NAND_ENODEV; }
uint32_t af_nand_inflight(void) { return 0; }
void af_nand_buf_read(unsigned ch, unsigned slot, unsigned off, void *dst, unsigned len) { memset(dst, 0xff, len); }
const volatile uint32_t *af_nand_buf_words(unsigned ch, unsigned slot) { return NULL; }
void af_nand_buf_write(unsigned ch, unsigned slot, unsigned off, const void *src, unsigned len) {}
unsigned af_nand_sync_slot(void) { return 0; }
uint32_t af_nand_ppa(unsigned ch, unsigned way, unsigned lun, unsigned block, unsigned page) { return AF_PPA_UNMAPPED; }
uint32_t af_nand_block_of(uint32_t ppa) { return 0; }
uint32_t af_nand_block_ppa(uint32_t gblock) { return AF_PPA_UNMAPPED; }
void af_nand_print_ppa(uint32_t ppa) { printf("-"); }
void af_nand_desc_init(af_nand_desc_t *d, unsigned opcode, uint32_t ppa) { memset(d, 0, sizeof(*d)); }
int af_nand_reset(unsigned ch, unsigned way, af_nand_cpl_t *cpl) { return AF_NAND_ENODEV; }
int af_nand_read_status(unsigned ch, unsigned way, af_nand_cpl_t *cpl) { return AF_NAND_ENODEV; }
int af_nand_read_id(unsigned ch, unsigned way, unsigned addr, uint8_t *buf, unsigned len) { return AF_NAND_ENODEV; }
int af_nand_read_param(unsigned ch, unsigned way, uint8_t *buf) { return AF_NAND_ENODEV; }
int af_nand_set_timing_mode(int mode) { return AF_NAND_ENODEV; }
int af_nand_read(uint32_t ppa, unsigned col, unsigned len, void *buf, unsigned flags, af_nand_cpl_t *cpl) { return AF_NAND_ENODEV; }
int af_nand_program(uint32_t ppa, unsigned col, const void *buf, unsigned len, unsigned flags, af_nand_cpl_t *cpl) { return AF_NAND_ENODEV; }
int af_nand_erase(uint32_t ppa, af_nand_cpl_t *cpl) { return AF_NAND_ENODEV; }
void af_nand_erase_many(const uint32_t *ppa, int *result, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		result[i] = AF_NAND_ENODEV;
}
int af_nand_reset_all(af_nand_cpl_t *cpls) { return AF_NAND_ENODEV; }
int af_nand_bringup(int max_mode) { printf("nand: no NAND controller in this build\n"); return AF_NAND_ENODEV; }
const char *af_nand_result_name(int r) { return "no controller"; }

#endif
