/* atomflash firmware: the NVMe controller's admin path.
 *
 * The gateware (rtl/nvme/controller.py) runs the I/O path alone; what is rare and varied comes here
 * through the controller's window (spec.NVME_FW_REGS, docs/nvme.md "Gateware and firmware"):
 *
 *   CC         EN 0 -> 1: the configuration is checked (CFS when this controller cannot run it), the
 *              admin CQ and SQ are created from AQA/ASQ/ACQ, RDY set.  EN 1 -> 0: a reset -- the
 *              write cache flushed, every queue dropped (queue engine RESET), the I/O commands in
 *              flight finish, features back to their defaults, RDY and CFS clear.  SHN: flush and
 *              checkpoint, SHST complete.
 *   admin      Identify (CNS 00h, 01h, 02h), Create/Delete I/O SQ/CQ (checked here, applied by the
 *              queue engine; a Delete I/O SQ completes once the queue's commands have), Get Log Page
 *              (01h, 02h, 03h, and the FTL's C0h/C1h), Get/Set Features, Abort (never aborts),
 *              Asynchronous Event Request.  Data goes to the host through the data mover, from one
 *              scratch page of SoC memory.
 *   events     every failed command (an I/O one from failed_*, an admin one here) enters the error
 *              log, a media error counts in SMART; an ignored doorbell becomes an error event for an
 *              outstanding Asynchronous Event Request, masked until the host reads the error log.
 *
 * This is sim/harness/nvme_firmware.py's NvmeFirmwareModel in C, check for check and in the same
 * order; it answers as the reference controller (host/atomflash/model/nvme.py) does, and
 * tb/nvme_controller runs both against the gateware.  Every layout, field and constant is the
 * generated header's (spec.NVME_*).
 *
 * Waiting on the gateware is polling its status with a bound (POLLS); a wait that runs out is
 * counted in af_nvme.timeouts and the path goes on, as no admin command may hang the main loop. */
#include <stddef.h>
#include <string.h>

#include "nvme.h"

#ifdef AF_NVME

af_nvme_t af_nvme;

#define PAGE_BYTES (1u << AF_NVME_PAGE_SHIFT)
#define POLLS 200000u
#define SUCCESS 0u
#define NO_COMPLETION 0xFFFFFFFFu /* the command completes later (an AER), or never (CFS) */

#define FIELD(name, v) (((v) & AF_NVME_FIELD_##name##_MASK) >> AF_NVME_FIELD_##name##_SHIFT)
#define PUT(name, x) (((uint32_t)(x) << AF_NVME_FIELD_##name##_SHIFT) & AF_NVME_FIELD_##name##_MASK)
#define REG(reg, bits, v) (((v) & AF_##reg##_##bits) >> AF_##reg##_##bits##_SHIFT)
#define STATUS(sct, sc) ((uint32_t)(sct) << 8 | (uint32_t)(sc))
#define GENERIC(sc) STATUS(AF_NVMESCT_GENERIC, AF_NVMEGENERICSTATUS_##sc)
#define SPECIFIC(sc) STATUS(AF_NVMESCT_COMMAND_SPECIFIC, AF_NVMECOMMANDSTATUS_##sc)

/* How an admin command ends: status (SCT << 8 | SC, or NO_COMPLETION) and DW0-DW1. */
typedef struct {
	uint32_t status;
	uint64_t result;
} reply_t;

static reply_t answer(uint32_t status, uint64_t result)
{
	reply_t r = {status, result};
	return r;
}

/* -- the window --------------------------------------------------------------------------------- */

static uint32_t rd(uint32_t offset)
{
	return af_nvme_hal_read(offset);
}

static void wr(uint32_t offset, uint32_t value)
{
	af_nvme_hal_write(offset, value);
}

static uint64_t rd64(uint32_t lo, uint32_t hi)
{
	return rd(lo) | (uint64_t)rd(hi) << 32;
}

static void act(uint32_t bits)
{
	wr(AF_NVMEFW_CTRL, bits);
}

/* Until every status bit of `busy` is clear (or `idle` set, when given). */
static int wait_status(uint32_t busy, uint32_t idle)
{
	for (uint32_t i = 0; i < POLLS; i++) {
		uint32_t st = rd(AF_NVMEFW_STATUS);
		if (!(st & busy) && (st & idle) == idle)
			return 0;
	}
	af_nvme.timeouts++;
	return -1;
}

static void set_csts(uint32_t clear, uint32_t set)
{
	wr(AF_NVMEFW_CSTS, (rd(AF_NVMEFW_CSTS) & ~clear) | set);
}

static void queue_op(uint32_t op, uint32_t qid, uint64_t base, uint32_t size, uint32_t cqid, uint32_t ien, uint32_t iv)
{
	wr(AF_NVMEFW_QUEUE_OP, (op << AF_NVMEFW_QUEUE_OP_OP_SHIFT & AF_NVMEFW_QUEUE_OP_OP) |
	   (qid << AF_NVMEFW_QUEUE_OP_QID_SHIFT & AF_NVMEFW_QUEUE_OP_QID) |
	   (cqid << AF_NVMEFW_QUEUE_OP_CQID_SHIFT & AF_NVMEFW_QUEUE_OP_CQID) |
	   (ien ? AF_NVMEFW_QUEUE_OP_IEN : 0) | (iv << AF_NVMEFW_QUEUE_OP_IV_SHIFT & AF_NVMEFW_QUEUE_OP_IV));
	wr(AF_NVMEFW_QUEUE_BASE_LO, (uint32_t)base);
	wr(AF_NVMEFW_QUEUE_BASE_HI, (uint32_t)(base >> 32));
	wr(AF_NVMEFW_QUEUE_SIZE, size);
	act(AF_NVMEFW_CTRL_CONFIG);
	wait_status(AF_NVMEFW_STATUS_CONFIG_BUSY, 0);
}

static void post(uint16_t cid, uint32_t status, uint64_t result)
{
	wait_status(AF_NVMEFW_STATUS_POST_BUSY, 0);
	wr(AF_NVMEFW_CPL_RESULT_LO, (uint32_t)result);
	wr(AF_NVMEFW_CPL_RESULT_HI, (uint32_t)(result >> 32));
	wr(AF_NVMEFW_CPL_STATUS, ((uint32_t)cid << AF_NVMEFW_CPL_STATUS_CID_SHIFT & AF_NVMEFW_CPL_STATUS_CID) |
	   ((status & 0xFFu) << AF_NVMEFW_CPL_STATUS_SC_SHIFT & AF_NVMEFW_CPL_STATUS_SC) |
	   ((status >> 8) << AF_NVMEFW_CPL_STATUS_SCT_SHIFT & AF_NVMEFW_CPL_STATUS_SCT));
	act(AF_NVMEFW_CTRL_POST);
}

uint32_t af_nvme_status_of(uint32_t status)
{
	switch (status) {
#define S(name) case AF_STATUS_##name: return AF_NVME_STATUS_OF_##name;
	S(SUCCESS) S(INVALID_OPCODE) S(INVALID_FIELD) S(LBA_OUT_OF_RANGE) S(ZERO_LENGTH) S(MISALIGNED_BUFFER)
	S(TRANSFER_TOO_LARGE) S(GROUP_TOO_LARGE) S(DUPLICATE_LBA) S(TOO_MANY_OPEN_TX) S(UNKNOWN_TX)
	S(INVALID_TID) S(PENDING_FULL) S(INVALID_TOKEN) S(REMAP_TOO_LARGE) S(REMAP_LENGTH) S(MEDIA_ERROR)
	S(NO_SPACE) S(NOT_READY) S(INTERNAL_ERROR) S(LIST_TOO_LONG) S(DATA_TRANSFER_ERROR) S(TID_IN_USE)
#undef S
	default: return AF_NVME_STATUS_OF_INTERNAL_ERROR;
	}
}

/* `bytes` of the scratch page to the host at the command's PRPs, through the data mover. */
static uint32_t send(const af_nvme_sqe_t *cmd, uint32_t bytes)
{
	af_nvme_hal_publish(af_nvme.cfg.scratch_addr, af_nvme.cfg.scratch, bytes);
	wr(AF_NVMEFW_MOVE_PRP1_LO, (uint32_t)cmd->prp1);
	wr(AF_NVMEFW_MOVE_PRP1_HI, (uint32_t)(cmd->prp1 >> 32));
	wr(AF_NVMEFW_MOVE_PRP2_LO, (uint32_t)cmd->prp2);
	wr(AF_NVMEFW_MOVE_PRP2_HI, (uint32_t)(cmd->prp2 >> 32));
	wr(AF_NVMEFW_MOVE_BYTES, (bytes << AF_NVMEFW_MOVE_BYTES_BYTES_SHIFT & AF_NVMEFW_MOVE_BYTES_BYTES) |
	   AF_NVMEFW_MOVE_BYTES_TO_HOST);
	wr(AF_NVMEFW_MOVE_LOCAL, af_nvme.cfg.scratch_addr);
	act(AF_NVMEFW_CTRL_MOVE);
	if (wait_status(AF_NVMEFW_STATUS_MOVE_BUSY, 0))
		return GENERIC(INTERNAL_ERROR);
	uint32_t status = rd(AF_NVMEFW_MOVE_STATUS);
	return status == AF_STATUS_SUCCESS ? SUCCESS : af_nvme_status_of(status);
}

/* -- features ------------------------------------------------------------------------------------ */

static void default_features(void)
{
	af_nvme.arbitration = 0;
	af_nvme.volatile_write_cache = PUT(WCE, af_nvme.cfg.volatile_cache ? 1 : 0);
	af_nvme.interrupt_coalescing = 0;
	af_nvme.async_event_config = 0;
}

static void apply_features(void)
{
	wr(AF_NVMEFW_FEATURES, FIELD(WCE, af_nvme.volatile_write_cache) ? AF_NVMEFW_FEATURES_WRITE_CACHE : 0);
}

/* The feature's value, or NULL for one this controller does not keep. */
static uint32_t *feature(uint32_t fid)
{
	switch (fid) {
	case AF_NVMEFEATURE_ARBITRATION: return &af_nvme.arbitration;
	case AF_NVMEFEATURE_VOLATILE_WRITE_CACHE: return &af_nvme.volatile_write_cache;
	case AF_NVMEFEATURE_INTERRUPT_COALESCING: return &af_nvme.interrupt_coalescing;
	case AF_NVMEFEATURE_ASYNC_EVENT_CONFIG: return &af_nvme.async_event_config;
	default: return NULL;
	}
}

static uint32_t number_of_queues(void)
{
	return PUT(NSQ, af_nvme.cfg.io_queues - 1) | PUT(NCQ, af_nvme.cfg.io_queues - 1);
}

/* -- events and the error log --------------------------------------------------------------------- */

static void log_error(uint32_t sqid, uint32_t cid, uint32_t status, uint64_t lba, uint32_t nsid)
{
	af_nvme.error_count++;
	af_nvme.errors_newest = (af_nvme.errors_newest + 1) % AF_NVME_IDENT_ERROR_LOG_ENTRIES;
	if (af_nvme.errors_kept < AF_NVME_IDENT_ERROR_LOG_ENTRIES)
		af_nvme.errors_kept++;
	af_nvme_error_t *e = &af_nvme.errors[af_nvme.errors_newest];
	e->error_count = af_nvme.error_count;
	e->sqid = (uint16_t)sqid;
	e->cid = (uint16_t)cid;
	/* the completion's status field, phase 0 */
	e->status = (uint16_t)(((status & 0xFFu) << AF_NVME_CQE_SF_SC_SHIFT & AF_NVME_CQE_SF_SC_MASK) |
			       ((status >> 8) << AF_NVME_CQE_SF_SCT_SHIFT & AF_NVME_CQE_SF_SCT_MASK));
	e->lba = lba;
	e->nsid = nsid;
}

static int admin_sq_exists(void)
{
	return af_nvme.sqs & 1u;
}

/* Complete outstanding Asynchronous Event Requests with the oldest events not masked. */
static void report_events(void)
{
	while (af_nvme.aers_n && admin_sq_exists()) {
		uint32_t i = 0;
		while (i < af_nvme.events_n && (af_nvme.masked >> af_nvme.events[i].type & 1u))
			i++;
		if (i == af_nvme.events_n)
			return;
		af_nvme_event_t ev = af_nvme.events[i];
		memmove(&af_nvme.events[i], &af_nvme.events[i + 1], (af_nvme.events_n - i - 1) * sizeof(ev));
		af_nvme.events_n--;
		af_nvme.masked |= 1u << ev.type;
		uint16_t cid = af_nvme.aers[0];
		memmove(&af_nvme.aers[0], &af_nvme.aers[1], (af_nvme.aers_n - 1) * sizeof(cid));
		af_nvme.aers_n--;
		post(cid, SUCCESS, PUT(AE_TYPE, ev.type) | PUT(AE_INFO, ev.info) | PUT(AE_LID, ev.lid));
	}
}

static void event(uint32_t type, uint32_t info, uint32_t lid)
{
	if (type == AF_NVME_FIELD_AE_TYPE_ERROR)
		log_error(AF_NVME_FIELD_NOT_GIVEN, AF_NVME_FIELD_NOT_GIVEN, SUCCESS, 0, 0);
	af_nvme_event_t ev = {(uint8_t)type, (uint8_t)info, (uint8_t)lid};
	uint32_t i = 0;
	while (i < af_nvme.events_n && memcmp(&af_nvme.events[i], &ev, sizeof(ev)))
		i++;
	if (i == af_nvme.events_n) {
		if (af_nvme.events_n < AF_NVME_EVENTS)
			af_nvme.events[af_nvme.events_n++] = ev;
		else
			af_nvme.events_dropped++;
	}
	report_events();
}

static void failed_io(void)
{
	uint32_t command = rd(AF_NVMEFW_FAILED_COMMAND), failure = rd(AF_NVMEFW_FAILED_STATUS);
	uint64_t lba = rd64(AF_NVMEFW_FAILED_LBA_LO, AF_NVMEFW_FAILED_LBA_HI);
	uint32_t nsid = rd(AF_NVMEFW_FAILED_NSID);
	act(AF_NVMEFW_CTRL_POP_FAILED);
	uint32_t sct = REG(NVMEFW_FAILED_STATUS, SCT, failure), sc = REG(NVMEFW_FAILED_STATUS, SC, failure);
	if (sct == AF_NVMESCT_MEDIA)
		af_nvme.media_errors++;
	log_error(REG(NVMEFW_FAILED_COMMAND, SQID, command), REG(NVMEFW_FAILED_COMMAND, CID, command),
		  STATUS(sct, sc), lba, nsid);
}

/* -- CC -------------------------------------------------------------------------------------------- */

static void enable(void)
{
	uint32_t cc = af_nvme.cc, aqa = rd(AF_NVMEFW_AQA);
	uint64_t asq = rd64(AF_NVMEFW_ASQ_LO, AF_NVMEFW_ASQ_HI), acq = rd64(AF_NVMEFW_ACQ_LO, AF_NVMEFW_ACQ_HI);
	uint32_t iosqes = REG(NVME_CC, IOSQES, cc), iocqes = REG(NVME_CC, IOCQES, cc);
	uint32_t asqs = REG(NVME_AQA, ASQS, aqa), acqs = REG(NVME_AQA, ACQS, aqa);
	if (REG(NVME_CC, MPS, cc) || REG(NVME_CC, CSS, cc) || (iosqes && iosqes != AF_NVME_SQES) ||
	    (iocqes && iocqes != AF_NVME_CQES) || asq % PAGE_BYTES || acq % PAGE_BYTES || !asqs || !acqs) {
		set_csts(0, AF_NVMEFW_CSTS_CFS);
		return;
	}
	queue_op(AF_NVMEQUEUEOP_CREATE_CQ, 0, acq, acqs, 0, 1, 0);
	queue_op(AF_NVMEQUEUEOP_CREATE_SQ, 0, asq, asqs, 0, 0, 0);
	af_nvme.cqs = af_nvme.sqs = 1u;
	af_nvme.sq_cq[0] = 0;
	set_csts(AF_NVMEFW_CSTS_SHST, AF_NVMEFW_CSTS_RDY);
}

static void reset(void)
{
	if (af_nvme.cfg.hooks.flush)
		af_nvme.cfg.hooks.flush(0);
	queue_op(AF_NVMEQUEUEOP_RESET, 0, 0, 0, 0, 0, 0);
	wait_status(0, AF_NVMEFW_STATUS_IO_IDLE);
	af_nvme.cqs = af_nvme.sqs = 0;
	af_nvme.aers_n = 0;
	default_features();
	apply_features();
	set_csts(AF_NVMEFW_CSTS_RDY | AF_NVMEFW_CSTS_CFS, 0);
}

static void cc_written(uint32_t value)
{
	uint32_t old = af_nvme.cc;
	af_nvme.cc = value;
	int was = !!(old & AF_NVME_CC_EN), now = !!(value & AF_NVME_CC_EN);
	if (was && !now)
		reset();
	else if (now && !was)
		enable();
	if (REG(NVME_CC, SHN, value) != AF_NVME_FIELD_SHN_NONE && REG(NVME_CC, SHN, old) == AF_NVME_FIELD_SHN_NONE) {
		if (af_nvme.cfg.hooks.flush)
			af_nvme.cfg.hooks.flush(1);
		set_csts(AF_NVMEFW_CSTS_SHST,
			 AF_NVME_FIELD_SHST_COMPLETE << AF_NVMEFW_CSTS_SHST_SHIFT & AF_NVMEFW_CSTS_SHST);
	}
}

/* -- admin commands ------------------------------------------------------------------------------ */

static uint32_t cdw10(const af_nvme_sqe_t *cmd)
{
	return (uint32_t)cmd->slba;
}

static uint32_t cdw11(const af_nvme_sqe_t *cmd)
{
	return (uint32_t)(cmd->slba >> 32);
}

/* MDTS: the largest transfer in pages as a power of two (model.nvme.mdts_of). */
static uint32_t mdts(void)
{
	const af_identify_t *id = af_nvme.cfg.identify;
	uint64_t pages = (uint64_t)id->max_transfer * id->lba_size / PAGE_BYTES;
	uint32_t bits = 0;
	while (pages >> bits)
		bits++;
	return bits >= 2 ? bits - 1 : 1;
}

/* An ASCII field of Identify: left aligned, space padded. */
static void ascii(uint8_t *field, const char *text, uint32_t bytes)
{
	uint32_t n = text ? (uint32_t)strlen(text) : 0;
	if (n > bytes)
		n = bytes;
	memset(field, ' ', bytes);
	if (n)
		memcpy(field, text, n);
}

static void identify_controller(void *page)
{
	const af_identify_t *L = af_nvme.cfg.identify;
	af_nvme_id_ctrl_t *c = page;
	c->vid = c->ssvid = AF_NVME_VENDOR_ID;
	ascii((uint8_t *)page + offsetof(af_nvme_id_ctrl_t, sn0), af_nvme.cfg.serial, 20);
	static const uint32_t model_number[] = {AF_NVME_IDENT_MN0, AF_NVME_IDENT_MN1, AF_NVME_IDENT_MN2,
						AF_NVME_IDENT_MN3, AF_NVME_IDENT_MN4, AF_NVME_IDENT_MN5,
						AF_NVME_IDENT_MN6, AF_NVME_IDENT_MN7, AF_NVME_IDENT_MN8,
						AF_NVME_IDENT_MN9};
	AF_STATIC_ASSERT(sizeof(model_number) == 40, "Identify's model number is 40 bytes");
	memcpy((uint8_t *)page + offsetof(af_nvme_id_ctrl_t, mn0), model_number, sizeof(model_number));
	c->fr0 = AF_NVME_IDENT_FR0;
	c->fr1 = AF_NVME_IDENT_FR1;
	c->mdts = (uint8_t)mdts();
	c->ver = AF_NVME_VERSION;
	c->cntrltype = AF_NVME_FIELD_CNTRLTYPE_IO;
	c->acl = AF_NVME_IDENT_ACL;
	c->aerl = AF_NVME_IDENT_AERL;
	c->frmw = (uint8_t)(PUT(FRMW_SLOT1_RO, 1) | PUT(FRMW_SLOTS, 1));
	c->lpa = (uint8_t)PUT(LPA_EXTENDED, 1);
	c->elpe = AF_NVME_IDENT_ERROR_LOG_ENTRIES - 1;
	c->sqes = AF_NVME_SQES | AF_NVME_SQES << 4;
	c->cqes = AF_NVME_CQES | AF_NVME_CQES << 4;
	c->nn = 1;
	c->oncs = (uint16_t)AF_NVME_ID_CTRL_ONCS_DSM_SET(AF_NVME_ID_CTRL_ONCS_WRITE_ZEROES_SET(0u, 1u), 1u);
	c->vwc = (uint8_t)(af_nvme.cfg.volatile_cache ? 1 : 0); /* bits 2:1 00b: no broadcast Flush */
	c->awun = (uint16_t)(L->max_transfer - 1);
	c->awupf = 0;
	c->af_magic = AF_IDENTIFY_MAGIC;
	c->af_max_atomic_pages = L->max_atomic_pages;
	c->af_max_open_tx = L->max_open_tx;
	c->af_max_pending = L->max_pending;
	c->af_max_remap_triples = L->max_remap_triples;
	c->af_max_appends = L->max_appends;
	c->af_spec_version = AF_SPEC_VERSION;
}

static void identify_namespace(void *page)
{
	const af_identify_t *L = af_nvme.cfg.identify;
	af_nvme_id_ns_t *ns = page;
	ns->nsze = ns->ncap = L->capacity;
	ns->nuse = af_nvme.cfg.hooks.blocks_in_use ? af_nvme.cfg.hooks.blocks_in_use() : 0;
	ns->nsfeat = (uint8_t)PUT(NSFEAT_NSABP, 1);
	ns->dlfeat = (uint8_t)PUT(DLFEAT_READ, AF_NVME_FIELD_DLFEAT_ZEROS);
	ns->nawun = (uint16_t)(L->max_transfer - 1);
	uint32_t lbads = 0;
	while (L->lba_size >> (lbads + 1))
		lbads++;
	ns->lbaf0 = AF_NVME_ID_NS_LBAF0_LBADS_SET(0u, lbads);
}

static reply_t identify(const af_nvme_sqe_t *cmd)
{
	void *page = af_nvme.cfg.scratch;
	memset(page, 0, AF_NVME_SCRATCH_BYTES);
	uint32_t cns = FIELD(CNS, cdw10(cmd)), size = AF_NVME_ID_CTRL_SIZE;  /* the namespace list is as long */
	if (cns == AF_NVMECNS_CONTROLLER) {
		identify_controller(page);
	} else if (cns == AF_NVMECNS_NAMESPACE) {
		if (cmd->nsid != AF_NVME_NSID)
			return answer(GENERIC(INVALID_NAMESPACE), 0);
		identify_namespace(page);
		size = AF_NVME_ID_NS_SIZE;
	} else if (cns == AF_NVMECNS_ACTIVE_NAMESPACES) {
		if (cmd->nsid >= AF_NVME_FIELD_NSID_ALL - 1)
			return answer(GENERIC(INVALID_NAMESPACE), 0);
		if (cmd->nsid < AF_NVME_NSID) {
			uint32_t first = AF_NVME_NSID;
			memcpy(page, &first, 4);
		}
	} else {
		return answer(GENERIC(INVALID_FIELD), 0);
	}
	return answer(send(cmd, size), 0);
}

/* The checks Create I/O CQ and SQ share; SUCCESS when the new queue may be made. */
static uint32_t check_new_queue(uint32_t qid, uint32_t qsize, uint32_t existing, uint32_t dw11, uint64_t base)
{
	if (qid < 1 || qid > af_nvme.cfg.io_queues || (existing >> qid & 1u))
		return SPECIFIC(INVALID_QID);
	if (qsize < 1 || qsize > af_nvme.cfg.mqes)
		return SPECIFIC(INVALID_QUEUE_SIZE);
	if (!FIELD(PC, dw11) || base % PAGE_BYTES)
		return GENERIC(INVALID_FIELD);
	return SUCCESS;
}

static reply_t create_cq(const af_nvme_sqe_t *cmd)
{
	uint32_t qid = FIELD(QID, cdw10(cmd)), qsize = FIELD(QSIZE, cdw10(cmd)), dw11 = cdw11(cmd);
	uint32_t status = check_new_queue(qid, qsize, af_nvme.cqs, dw11, cmd->prp1);
	if (status != SUCCESS)
		return answer(status, 0);
	uint32_t ien = FIELD(IEN, dw11), iv = FIELD(IV, dw11);
	if (ien && (iv < 1 || iv > af_nvme.cfg.io_queues))
		return answer(SPECIFIC(INVALID_INTERRUPT_VECTOR), 0);
	if (REG(NVME_CC, IOCQES, af_nvme.cc) != AF_NVME_CQES) {
		set_csts(0, AF_NVMEFW_CSTS_CFS);
		return answer(NO_COMPLETION, 0);
	}
	queue_op(AF_NVMEQUEUEOP_CREATE_CQ, qid, cmd->prp1, qsize, 0, ien, iv);
	af_nvme.cqs |= 1u << qid;
	return answer(SUCCESS, 0);
}

static reply_t create_sq(const af_nvme_sqe_t *cmd)
{
	uint32_t qid = FIELD(QID, cdw10(cmd)), qsize = FIELD(QSIZE, cdw10(cmd)), dw11 = cdw11(cmd);
	uint32_t status = check_new_queue(qid, qsize, af_nvme.sqs, dw11, cmd->prp1);
	if (status != SUCCESS)
		return answer(status, 0);
	uint32_t cqid = FIELD(CQID, dw11);
	if (cqid == 0 || cqid > AF_NVME_MAX_IO_QUEUES || !(af_nvme.cqs >> cqid & 1u))
		return answer(SPECIFIC(INVALID_CQ), 0);
	if (REG(NVME_CC, IOSQES, af_nvme.cc) != AF_NVME_SQES) {
		set_csts(0, AF_NVMEFW_CSTS_CFS);
		return answer(NO_COMPLETION, 0);
	}
	queue_op(AF_NVMEQUEUEOP_CREATE_SQ, qid, cmd->prp1, qsize, cqid, 0, 0);
	af_nvme.sqs |= 1u << qid;
	af_nvme.sq_cq[qid] = (uint8_t)cqid;
	return answer(SUCCESS, 0);
}

static reply_t delete_sq(const af_nvme_sqe_t *cmd)
{
	uint32_t qid = FIELD(QID, cdw10(cmd));
	if (qid == 0 || qid > AF_NVME_MAX_IO_QUEUES || !(af_nvme.sqs >> qid & 1u))
		return answer(SPECIFIC(INVALID_QID), 0);
	queue_op(AF_NVMEQUEUEOP_DELETE_SQ, qid, 0, 0, 0, 0, 0);
	af_nvme.sqs &= ~(1u << qid);
	uint32_t i = 0;
	while (i < POLLS && (rd(AF_NVMEFW_BUSY_QUEUES) >> qid & 1u)) /* its commands (aborted or run) complete first */
		i++;
	if (i == POLLS)
		af_nvme.timeouts++;
	return answer(SUCCESS, 0);
}

static reply_t delete_cq(const af_nvme_sqe_t *cmd)
{
	uint32_t qid = FIELD(QID, cdw10(cmd));
	if (qid == 0 || qid > AF_NVME_MAX_IO_QUEUES || !(af_nvme.cqs >> qid & 1u))
		return answer(SPECIFIC(INVALID_QID), 0);
	for (uint32_t sq = 0; sq <= AF_NVME_MAX_IO_QUEUES; sq++)
		if ((af_nvme.sqs >> sq & 1u) && af_nvme.sq_cq[sq] == qid)
			return answer(SPECIFIC(INVALID_QUEUE_DELETION), 0);
	queue_op(AF_NVMEQUEUEOP_DELETE_CQ, qid, 0, 0, 0, 0, 0);
	af_nvme.cqs &= ~(1u << qid);
	return answer(SUCCESS, 0);
}

static reply_t abort_command(const af_nvme_sqe_t *cmd)
{
	return answer(SUCCESS, PUT(NOT_ABORTED, 1));
}

static reply_t async_event_request(uint16_t cid)
{
	if (af_nvme.aers_n > AF_NVME_IDENT_AERL)
		return answer(SPECIFIC(AER_LIMIT), 0);
	af_nvme.aers[af_nvme.aers_n++] = cid;
	return answer(NO_COMPLETION, 0);
}

/* 512,000-byte units, rounded up (SMART's data units). */
static uint64_t data_units(uint64_t blocks)
{
	uint64_t bytes = blocks * af_nvme.cfg.identify->lba_size;
	return (bytes + 1000u * 512u - 1) / (1000u * 512u);
}

static void smart_log(void *page)
{
	af_nvme_smart_t *s = page;
	s->available_spare = AF_NVME_IDENT_AVAILABLE_SPARE;
	s->spare_threshold = AF_NVME_IDENT_SPARE_THRESHOLD;
	s->data_units_read = data_units(rd64(AF_NVMEFW_BLOCKS_READ_LO, AF_NVMEFW_BLOCKS_READ_HI));
	s->data_units_written = data_units(rd64(AF_NVMEFW_BLOCKS_WRITTEN_LO, AF_NVMEFW_BLOCKS_WRITTEN_HI));
	s->host_reads = rd(AF_NVMEFW_READ_COMMANDS);
	s->host_writes = rd(AF_NVMEFW_WRITE_COMMANDS);
	s->power_cycles = af_nvme.cfg.power_cycles;
	s->unsafe_shutdowns = af_nvme.cfg.unsafe_shutdowns;
	s->media_errors = af_nvme.media_errors;
	if (af_nvme.cfg.hooks.percentage_used) {
		uint32_t used = af_nvme.cfg.hooks.percentage_used();
		s->percentage_used = (uint8_t)(used > 255 ? 255 : used); /* the field saturates at 255 */
	}
	s->error_log_entries = af_nvme.error_count;
}

static void error_log(void *page)
{
	af_nvme_error_log_t *out = page;
	AF_STATIC_ASSERT(AF_NVME_IDENT_ERROR_LOG_ENTRIES * AF_NVME_ERROR_LOG_SIZE <= AF_NVME_SCRATCH_BYTES,
			 "the error log fits the scratch page");
	for (uint32_t i = 0; i < af_nvme.errors_kept; i++) {  /* newest first */
		const af_nvme_error_t *e = &af_nvme.errors[(af_nvme.errors_newest + AF_NVME_IDENT_ERROR_LOG_ENTRIES - i) %
							   AF_NVME_IDENT_ERROR_LOG_ENTRIES];
		out[i].error_count = e->error_count;
		out[i].sqid = e->sqid;
		out[i].cid = e->cid;
		out[i].status = e->status;
		out[i].param = AF_NVME_FIELD_NOT_GIVEN;
		out[i].lba = e->lba;
		out[i].nsid = e->nsid;
	}
}

static reply_t get_log_page(const af_nvme_sqe_t *cmd)
{
	uint32_t dw10 = cdw10(cmd), dw11 = cdw11(cmd), lid = FIELD(LID, dw10);
	uint64_t length = (((uint64_t)FIELD(NUMDU, dw11) << 16 | FIELD(NUMDL, dw10)) + 1) * 4;
	uint64_t offset = cmd->cdw12 | (uint64_t)cmd->cdw13 << 32;
	uint8_t *page = af_nvme.cfg.scratch;
	memset(page, 0, AF_NVME_SCRATCH_BYTES);
	uint32_t size;
	if (lid == AF_NVMELOGPAGE_ERROR) {
		error_log(page);
		size = AF_NVME_IDENT_ERROR_LOG_ENTRIES * AF_NVME_ERROR_LOG_SIZE;
	} else if (lid == AF_NVMELOGPAGE_SMART) {
		smart_log(page);
		size = AF_NVME_SMART_SIZE;
	} else if (lid == AF_NVMELOGPAGE_FIRMWARE) {
		af_nvme_fw_slot_t *f = (af_nvme_fw_slot_t *)page;
		f->afi = 1;  /* slot 1 runs */
		f->frs1_0 = AF_NVME_IDENT_FR0;
		f->frs1_1 = AF_NVME_IDENT_FR1;
		size = AF_NVME_FW_SLOT_SIZE;
	} else if ((lid == AF_NVMELOGPAGE_ATOMFLASH_STATS || lid == AF_NVMELOGPAGE_ATOMFLASH_OPEN) &&
		   af_nvme.cfg.hooks.vendor_log) {
		int32_t n = af_nvme.cfg.hooks.vendor_log(lid, page, AF_NVME_SCRATCH_BYTES);
		if (n < 0)
			return answer(SPECIFIC(INVALID_LOG_PAGE), 0);
		size = (uint32_t)n;
	} else {
		return answer(SPECIFIC(INVALID_LOG_PAGE), 0);
	}
	if (offset % 4 || offset > size || length > ((uint64_t)PAGE_BYTES << mdts()))
		return answer(GENERIC(INVALID_FIELD), 0);
	/* CHOICE: the data is built and sent in one page; the reference takes up to MDTS of zeros beyond it */
	if (length > AF_NVME_SCRATCH_BYTES)
		return answer(GENERIC(INVALID_FIELD), 0);
	memmove(page, page + offset, size - (uint32_t)offset);
	memset(page + (size - (uint32_t)offset), 0, AF_NVME_SCRATCH_BYTES - (size - (uint32_t)offset));
	uint32_t status = send(cmd, (uint32_t)length);
	if (status != SUCCESS)
		return answer(status, 0);
	if (lid == AF_NVMELOGPAGE_ERROR && !FIELD(RAE, dw10))
		af_nvme.masked &= ~(1u << AF_NVME_FIELD_AE_TYPE_ERROR);
	return answer(SUCCESS, 0);
}

static reply_t get_features(const af_nvme_sqe_t *cmd)
{
	uint32_t fid = FIELD(FID, cdw10(cmd));
	if (fid == AF_NVMEFEATURE_NUMBER_OF_QUEUES)
		return answer(SUCCESS, number_of_queues());
	const uint32_t *value = feature(fid);
	if (!value)
		return answer(GENERIC(INVALID_FIELD), 0);
	return answer(SUCCESS, *value);
}

static reply_t set_features(const af_nvme_sqe_t *cmd)
{
	uint32_t fid = FIELD(FID, cdw10(cmd)), value = cdw11(cmd);
	if (fid == AF_NVMEFEATURE_NUMBER_OF_QUEUES)
		return answer(SUCCESS, number_of_queues());
	uint32_t *kept = feature(fid);
	if (!kept)
		return answer(GENERIC(INVALID_FIELD), 0);
	if (fid == AF_NVMEFEATURE_VOLATILE_WRITE_CACHE) {
		uint32_t on = FIELD(WCE, value);
		if (on && !af_nvme.cfg.volatile_cache)
			return answer(GENERIC(INVALID_FIELD), 0);
		if (!on && af_nvme.cfg.hooks.flush)
			af_nvme.cfg.hooks.flush(0);
		value = PUT(WCE, on);
	}
	*kept = value;
	apply_features();
	return answer(SUCCESS, 0);
}

static void admin(void)
{
	uint32_t dwords[AF_NVME_SQE_SIZE / 4];
	for (uint32_t i = 0; i < AF_NVME_SQE_SIZE / 4; i++)
		dwords[i] = rd(AF_NVMEFW_ADMIN_SQE(i));
	act(AF_NVMEFW_CTRL_POP_ADMIN);
	af_nvme.admin_commands++;
	af_nvme_sqe_t cmd;
	memcpy(&cmd, dwords, sizeof(cmd));
	uint32_t opc = AF_NVME_SQE_CDW0_OPC_GET(cmd.cdw0);
	uint16_t cid = (uint16_t)AF_NVME_SQE_CDW0_CID_GET(cmd.cdw0);
	int known = 1;
	switch (opc) {
	case AF_NVMEADMINOPCODE_IDENTIFY: case AF_NVMEADMINOPCODE_CREATE_IO_CQ: case AF_NVMEADMINOPCODE_CREATE_IO_SQ:
	case AF_NVMEADMINOPCODE_DELETE_IO_SQ: case AF_NVMEADMINOPCODE_DELETE_IO_CQ: case AF_NVMEADMINOPCODE_GET_LOG_PAGE:
	case AF_NVMEADMINOPCODE_GET_FEATURES: case AF_NVMEADMINOPCODE_SET_FEATURES: case AF_NVMEADMINOPCODE_ABORT:
	case AF_NVMEADMINOPCODE_ASYNC_EVENT_REQUEST:
		break;
	default:
		known = 0;
	}
	reply_t r;
	if (!known)
		r = answer(GENERIC(INVALID_OPCODE), 0);
	else if (AF_NVME_SQE_CDW0_PSDT_GET(cmd.cdw0) || AF_NVME_SQE_CDW0_FUSE_GET(cmd.cdw0))
		r = answer(GENERIC(INVALID_FIELD), 0);
	else if (opc == AF_NVMEADMINOPCODE_IDENTIFY)
		r = identify(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_CREATE_IO_CQ)
		r = create_cq(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_CREATE_IO_SQ)
		r = create_sq(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_DELETE_IO_SQ)
		r = delete_sq(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_DELETE_IO_CQ)
		r = delete_cq(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_GET_LOG_PAGE)
		r = get_log_page(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_GET_FEATURES)
		r = get_features(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_SET_FEATURES)
		r = set_features(&cmd);
	else if (opc == AF_NVMEADMINOPCODE_ABORT)
		r = abort_command(&cmd);
	else
		r = async_event_request(cid);
	if (r.status != NO_COMPLETION) {
		if (r.status != SUCCESS)
			log_error(0, cid, r.status, 0, cmd.nsid);
		post(cid, r.status, r.result);
	}
	report_events();
}

/* -- the main loop's entry points ---------------------------------------------------------------- */

int af_nvme_start(const af_nvme_config_t *cfg)
{
	memset(&af_nvme, 0, sizeof(af_nvme));
	af_nvme.cfg = *cfg;
	if (cfg->io_queues < 1 || cfg->io_queues > AF_NVME_MAX_IO_QUEUES)
		return -1;
	if (rd(AF_NVMEFW_ID) != AF_NVME_FW_REGS_ID)
		return -1;
	default_features();
	wr(AF_NVMEFW_STAGING_BASE, cfg->staging_base);
	apply_features();
	af_nvme.errors_newest = AF_NVME_IDENT_ERROR_LOG_ENTRIES - 1;
	af_nvme.started = 1;
	return 0;
}

int af_nvme_poll(void)
{
	if (!af_nvme.started)
		return 0;
	uint32_t st = rd(AF_NVMEFW_STATUS);
	int worked = 0;
	if (st & AF_NVMEFW_STATUS_CC_CHANGED) {
		act(AF_NVMEFW_CTRL_ACK_CC);
		cc_written(rd(AF_NVMEFW_CC));
		worked = 1;
	}
	if (st & AF_NVMEFW_STATUS_FAILED_VALID) {
		failed_io();
		worked = 1;
	}
	if (st & AF_NVMEFW_STATUS_DOORBELL_ERROR_VALID) {
		uint32_t e = rd(AF_NVMEFW_DOORBELL_ERROR);
		act(AF_NVMEFW_CTRL_POP_DOORBELL_ERROR);
		if (admin_sq_exists()) /* a controller not ready ignores doorbells, raising no event either */
			event(AF_NVME_FIELD_AE_TYPE_ERROR, (e & AF_NVMEFW_DOORBELL_ERROR_KIND)
			      ? AF_NVMEASYNCERRORINFO_INVALID_DOORBELL_VALUE : AF_NVMEASYNCERRORINFO_INVALID_DOORBELL_REGISTER,
			      AF_NVMELOGPAGE_ERROR);
		worked = 1;
	}
	if (st & AF_NVMEFW_STATUS_ADMIN_VALID) {
		admin();
		worked = 1;
	}
	return worked;
}

#endif /* AF_NVME */
