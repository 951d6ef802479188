/* nand_model.cpp -- behavioural model of one ONFI NAND target (SDR and NV-DDR2, x8).
 *
 * What this is
 * ============
 *
 * atomflash's controller, firmware and recovery are all verified against this
 * model, so it has three jobs: behave like a NAND part a controller can drive,
 * catch every mistake a controller can make on the bus, and fail the way real
 * flash fails (bad blocks, bit errors, program/erase failures, torn pages when
 * power is cut, MLC paired-page damage).  Vendor models are closed and no
 * open one covers faults, so this is ours.
 *
 * The split between SystemVerilog and C++
 * ---------------------------------------
 *
 * A NAND target is asynchronous: the host strobes WE# and RE# and the part
 * reacts to edges, with setup, hold and pulse-width constraints measured in
 * nanoseconds.  A simulation, however, is clocked.  nand_model.sv therefore
 * samples all pins on every edge of a reference clock `clk` (in every atomflash
 * simulation the controller's own clock) and calls into this file only when
 * something *happens*: a pin changed, or a deadline this file asked for has
 * arrived (an array operation ends, R/B# must fall tWB after a confirm, read
 * data becomes valid tREA after RE# fell, a scheduled power cut).  Between
 * events no C++ runs at all, so an idle or busy target costs nothing per
 * cycle and a transferring one costs a DPI call per pin edge.
 *
 * Time is `cycle * clk_period_ps`.  Every interface timing is measured at
 * that resolution: a controller running on the same clock produces edges on
 * clock boundaries, so what the model measures is exactly what the controller
 * produced (a pulse of N cycles measures N periods).  A sampled value that
 * changes in the same sample as a strobe edge counts as changing *after* the
 * edge: the edge latches the previous sample and the hold time measured is 0.
 *
 * Interface timing
 * ----------------
 *
 * Minimum times (tWP, tWH, tWC, tRP, tREH, tRC, tCLS, tCLH, tALS, tALH, tCS,
 * tCH, tDS, tDH, tADL, tWHR, tRHW, tAR, tCLR, tRR, tCCS, tWB as "wait before
 * the next command") are checked at the edge that ends them, against the
 * ONFI table of the selected interface and timing mode (atomflash_spec.h,
 * generated from spec.py; SET FEATURES 01h changes them).  In NV-DDR2 each
 * SDR check becomes its NV-DDR2 namesake (af_onfi_ddr2_for_sdr) and the DQS
 * and preamble rules join them (the NV-DDR2 section, at on_dqs_edge).  Each
 * violation is reported once with the parameter's name, the measured and the
 * required time, and counted per parameter.  Strict mode turns the first one
 * into $fatal.
 *
 * The device's maximum times are enforced by behaviour rather than checks:
 * R/B# falls exactly tWB after a confirm (status read before then still says
 * ready); read data becomes valid only max(tREA after RE# fell, tCEA after
 * CE# fell) -- until then DQ carries a deliberately wrong byte, so a
 * controller that samples early reads garbage.  If a byte's valid window
 * closes before it opens (RE# falls again, CE# rises), the model also reports
 * tREA or tCEA: no host could have sampled it.
 *
 * Commands
 * --------
 *
 * RESET FFh, READ ID 90h (00h: ID bytes, 20h: "ONFI"), READ PARAMETER PAGE
 * ECh (three identical copies with CRC-16), READ STATUS 70h, READ STATUS
 * ENHANCED 78h (per LUN and plane), SET/GET FEATURES EFh/EEh (timing mode),
 * READ 00h-30h (and 00h alone to return to data output after status
 * polling), CHANGE READ COLUMN 05h-E0h, CHANGE READ COLUMN ENHANCED 06h-E0h,
 * PAGE PROGRAM 80h-10h, CHANGE WRITE COLUMN 85h (two address cycles), BLOCK
 * ERASE 60h-D0h, COPYBACK READ 00h-35h, COPYBACK PROGRAM 85h (five address
 * cycles)-10h, and multi-plane PROGRAM (80h-11h ... 80h-10h), READ (00h-32h
 * ... 00h-30h) and ERASE (60h-D1h ... 60h-D0h).  Anything else -- an
 * unknown opcode, a wrong number of address cycles, a confirm without its
 * setup, a command to a busy LUN, reading data that is not there -- is a
 * protocol error: reported, counted, and the sequence is dropped.
 *
 * Each LUN has a page register per plane and one array state machine, so
 * commands to different LUNs overlap; R/B# is low while any LUN is busy.  The
 * row address is page | block << page_bits | lun << (page_bits + block_bits);
 * the plane is the block's low bits (NandProfile.planes, from the profile).
 * A multi-plane operation queues planes with 11h / 32h / D1h (busy tDBSY
 * each) and its last confirm runs one array operation -- one tPROG, tR or
 * tBERS -- over a list of targets, one per plane: every array operation,
 * single-plane ones too, is such a list, so failures, power cuts and
 * statistics apply per plane.  The ONFI address rules (one LUN, one page,
 * distinct planes, equal block bits above the plane bits) are checked as
 * the planes come; a broken rule is a protocol error and the operation does
 * nothing but report FAIL.
 *
 * The array and its image
 * -----------------------
 *
 * The array lives in an image file (layout: atomflash.nandsim, generated into
 * nand_model_gen.h) mapped MAP_SHARED.  Every completed program or erase is
 * in the file the moment it completes, so killing the simulation loses
 * nothing that finished; starting a simulation on the same image is a power
 * cycle.  The file is sparse: an erased page is a flag in the page table, its
 * data bytes are never touched (and an erase punches the block's data out of
 * the file).  A program in flight is flagged in the image when it starts; if
 * the process dies before it completes, the next open turns the page torn.
 *
 * Media rules: erase gives all-FFh; a program can only clear bits (it ANDs);
 * at most `nop` programs per page per erase; pages ascending within a block;
 * program/erase of a factory-bad block, with WP# low, past the endurance
 * limit, or injected, ends with FAIL.  Rule breaks are counted and reported
 * but carried out as the silicon would.
 *
 * Faults
 * ------
 *
 * All randomness comes from one xoshiro256** generator seeded by `seed` and
 * the image's power-on count, so a run is reproducible.  Raw bit errors are
 * injected when the array is read into the page register, at
 * bit_error_rate + bit_error_growth * erase_count per bit (positions drawn by
 * geometric gaps, so a low rate costs little).  A power cut -- at a time, or
 * at a given progress into the k-th program or erase, or into the k-th
 * program of a page whose OOB record has a given kind (the byte at the page
 * layout's record column, from nand_model_gen.h) -- tears the operation
 * in flight: a torn page keeps each bit the program was to clear with
 * probability `progress` plus scattered marginal bits; an interrupted erase
 * sets each 0 bit of each page of the block with probability `progress`.  In
 * MLC mode (mlc_paired) a torn upper page also damages its paired lower page
 * (pairing: word line 0 holds pages 0/2, word line n holds 2n-1/2n+2, the
 * last holds ppb-3/ppb-1 -- the common 2-bit "shared page" order).  After
 * a cut the model stops answering (R/B# low, DQ released) until the
 * simulation restarts on the image.
 */

#include "nand_model.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "nand_model_gen.h"

namespace {

constexpr int64_t NEVER = INT64_MAX;
constexpr int64_t LONG_AGO = INT64_MIN / 4;

/* ---------------------------------------------------------------- random */

struct Rng {
    uint64_t s[4];
    void seed(uint64_t x) {
        for (auto &w : s) {  // splitmix64 expansion
            x += 0x9e3779b97f4a7c15ull;
            uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            w = z ^ (z >> 31);
        }
    }
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t next() {
        uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
        return r;
    }
    double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  /* [0, 1) */
    /* Visit each of `n` positions with probability p, by geometric gaps. */
    template <class F> uint64_t sample(uint64_t n, double p, F visit) {
        if (p <= 0) return 0;
        uint64_t hits = 0;
        if (p >= 1) { for (uint64_t i = 0; i < n; i++) visit(i); return n; }
        double lq = log1p(-p);
        for (uint64_t i = 0;;) {
            double u = uniform();
            double gap = floor(log1p(-u) / lq);
            if (gap >= double(n - i)) break;
            i += uint64_t(gap);
            visit(i);
            hits++;
            if (++i >= n) break;
        }
        return hits;
    }
};

/* ------------------------------------------------------------ utilities */

std::string trim(const std::string &s) {
    size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

std::vector<std::vector<int64_t>> parse_list(const std::string &text) {
    std::vector<std::vector<int64_t>> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        item = trim(item);
        if (item.empty()) continue;
        std::vector<int64_t> parts;
        std::stringstream is(item);
        std::string p;
        while (std::getline(is, p, ':')) parts.push_back(strtoll(trim(p).c_str(), nullptr, 0));
        out.push_back(parts);
    }
    return out;
}

int bits_for(int64_t n) { int b = 0; while ((int64_t(1) << b) < n) b++; return std::max(b, 1); }

/* ONFI parameter page CRC-16: polynomial 8005h, initial 4F4Eh, no reflection. */
uint16_t onfi_crc16(const uint8_t *p, size_t n) {
    uint16_t crc = 0x4F4E;
    for (size_t i = 0; i < n; i++) {
        crc ^= uint16_t(p[i]) << 8;
        for (int b = 0; b < 8; b++) crc = (crc & 0x8000) ? uint16_t((crc << 1) ^ 0x8005) : uint16_t(crc << 1);
    }
    return crc;
}

/* ------------------------------------------------------------- the model */

enum class Out { NONE, STATUS, ID, PARAM, FEATURES, DATA };
enum class Op { IDLE, READ, COPYBACK_READ, PROGRAM, ERASE, RESET, PARAM, FEATURES, DBSY };

const char *op_name(Op op) {
    switch (op) {
    case Op::IDLE: return "idle";
    case Op::READ: return "read";
    case Op::COPYBACK_READ: return "copyback-read";
    case Op::PROGRAM: return "program";
    case Op::ERASE: return "erase";
    case Op::RESET: return "reset";
    case Op::PARAM: return "param-page";
    case Op::FEATURES: return "features";
    case Op::DBSY: return "multi-plane tDBSY";
    }
    return "?";
}

/* One plane's share of an array operation (a single-plane operation has one). */
struct Target {
    int64_t row;
    int plane;
    bool fail;                  /* this plane's part will end with FAIL */
    uint8_t kind;               /* program: the OOB record kind byte of the page */
};

struct Lun {
    std::vector<std::vector<uint8_t>> regs;  /* page register of each plane (data + spare) */
    std::vector<uint8_t> reg_valid;   /* per plane: holds what the last array read loaded */
    std::vector<uint8_t> plane_fail;  /* per plane: SR[0] of the last program/erase (READ STATUS ENHANCED) */
    int cur = 0;                /* plane whose register data input and output use */
    bool copyback_ready = false;
    int64_t cb_row = -1;        /* row of the last COPYBACK READ */
    Op op = Op::IDLE;
    int64_t row = 0;            /* row of the program being assembled / of the operation */
    std::vector<Target> targets;  /* the planes the array operation in flight works on */
    int64_t start_ps = 0;       /* when R/B# falls (latch + tWB) */
    int64_t end_ps = 0;         /* when it rises */
    int64_t cut_ps = NEVER;     /* scheduled power cut inside this operation */
    double cut_progress = 0;
    uint8_t status_fail = 0;    /* SR[0] of the last program/erase: any plane failed (READ STATUS) */
    uint64_t busy_ps = 0;
    std::vector<uint8_t> &reg() { return regs[cur]; }
};

struct Violation { std::string param; int64_t measured_ps, required_ps, t_ps; };

struct Stats {
    uint64_t reads = 0, programs = 0, erases = 0, bytes_in = 0, bytes_out = 0, commands = 0;
    uint64_t programs_kind[256] = {};  /* programs by the OOB record kind byte of the page programmed */
    uint64_t protocol_errors = 0, media_violations = 0, bit_errors = 0, program_fails = 0, erase_fails = 0;
    uint64_t nop_violations = 0, order_violations = 0;
    uint64_t multi_plane_ops = 0;      /* array operations on more than one plane */
    /* SDR parameters, tCCS (not a table entry), then the NV-DDR2 table's */
    uint64_t timing[AF_ONFI_TIMING_COUNT + 1 + AF_ONFI_DDR2_TIMING_COUNT] = {};
    uint64_t timing_total = 0;
    std::vector<Violation> timing_log;
    std::vector<std::string> error_log;
};

const int T_CCS = AF_ONFI_TIMING_COUNT;
const int T_DDR2 = AF_ONFI_TIMING_COUNT + 1;   /* + AF_ONFI_DDR2_*: an NV-DDR2 parameter */
const int T_COUNT = T_DDR2 + AF_ONFI_DDR2_TIMING_COUNT;

class NandModel {
public:
    int index;
    NandConfig cfg;
    std::string config_path, overrides;
    bool config_ok = true;

    NandModel(int idx, std::string path, std::string over)
        : index(idx), config_path(std::move(path)), overrides(std::move(over)) {}
    ~NandModel() { shutdown(); }

    /* ---- lifecycle */
    void power_on(int64_t cycle);
    void shutdown();
    int64_t eval(int64_t cycle, uint32_t pins, int *outs);
    int64_t control(int64_t cycle, int op, int64_t a0, int64_t a1, int64_t a2);

private:
    /* geometry */
    int64_t page_bytes = 0, pages = 0, blocks = 0;
    int page_bits = 1, block_bits = 1;
    int planes = 1, plane_bits = 0;   /* the plane: the low plane_bits of the block address */

    /* image */
    int fd = -1;
    uint8_t *map = nullptr;
    size_t map_size = 0;
    af_nandimg_header_t *hdr = nullptr;
    af_nandimg_block_t *btab = nullptr;
    af_nandimg_page_t *ptab = nullptr;
    uint8_t *data = nullptr;

    Rng rng;
    Stats st;
    FILE *trace = nullptr;
    std::string stats_path;
    bool open_ = false;

    /* time */
    int64_t period_ps = 10000, cycle0 = 0, now = 0;
    int mode = 0;               /* timing mode of the interface in use */
    int iface = AF_ONFIINTERFACE_SDR;
    int pending_iface = -1;     /* SET FEATURES' interface, applied with pending_mode */
    int64_t t_itc_ref = LONG_AGO;  /* R/B# rose after an interface change: tITC runs */
    bool ddr() const { return iface == AF_ONFIINTERFACE_NV_DDR2; }

    /* NV-DDR2 data input: DQS from the host */
    int64_t t_dqs_edge = LONG_AGO, t_dqs_rise = LONG_AGO, t_dqs_fall = LONG_AGO, t_dqs_low = LONG_AGO;
    bool dqs_edges = false;     /* a DQS edge latched data since the host began driving */
    bool dq_since_dqs = false;  /* DQ changed since the last latching DQS edge (tDH checked once) */
    bool dqs_sdr_reported = false;
    int feature_copy = 0;       /* NV-DDR2 SET FEATURES: each parameter byte comes twice */

    /* NV-DDR2 data output: DQS and DQ follow RE# edges by t_dqsre */
    struct DqsEvent { int64_t t; int level; uint8_t byte; };  /* level -1: drive DQS low (preamble) */
    std::deque<DqsEvent> dqs_q;
    bool dqs_out = false;       /* DQS driven */
    bool dqs_level = false;
    uint8_t ddr_byte = 0;
    bool ddr_valid = false;     /* DQ carries a byte (an edge has come) */
    bool re_pre = false;        /* RE# fell after a latch: the preamble; edges from the next rise carry bytes */
    int64_t t_re_pre = LONG_AGO;
    int repeat_half = 0;        /* ID, parameter page and features: each byte on two edges */
    bool strict_fatal = false, finish_req = false;

    /* pins as last sampled */
    uint32_t pins = NAND_PIN_CE_N | NAND_PIN_WE_N | NAND_PIN_RE_N | NAND_PIN_WP_N;
    bool first_eval = true;
    int64_t t_ce_fall = LONG_AGO, t_ce_rise = LONG_AGO, t_cle_chg = LONG_AGO, t_cle_fall = LONG_AGO;
    int64_t t_ale_chg = LONG_AGO, t_ale_fall = LONG_AGO, t_dq_chg = LONG_AGO;
    int64_t t_we_fall = LONG_AGO, t_we_rise = LONG_AGO, t_re_fall = LONG_AGO, t_re_rise = LONG_AGO;
    int64_t t_ready = LONG_AGO;       /* R/B# last rose */
    int64_t t_wb_ref = LONG_AGO;      /* WE# rise of the last busy-causing command */
    int64_t t_addr_rise = LONG_AGO;   /* WE# rise of the last address cycle */
    int64_t t_ccs_ref = LONG_AGO;     /* WE# rise of the last E0h / change-column */
    enum class Latch { NONE, CMD, ADDR, DATA } last_latch = Latch::NONE;
    bool cle_since_latch = false, ale_since_latch = false, dq_since_latch = false, ce_since_latch = false;
    bool re_since_latch = false, data_since_addr = false;

    /* command sequencer */
    uint8_t cmd = 0;           /* command being assembled (0 with no_cmd = none) */
    bool have_cmd = false;
    std::vector<uint8_t> addr;
    bool in_data = false;      /* data-input phase of 80h / 85h / EFh */
    bool data_copyback = false;
    bool prog_seq = false;     /* 80h/85h addresses taken: a program sequence is open */
    int sel_lun = 0;           /* LUN of the last address (status, data in/out) */
    int status_plane = -1;     /* READ STATUS ENHANCED's plane (FAIL of that plane); -1: any plane */
    /* Multi-plane sequence: planes queued by 11h / 32h / D1h until the confirm that starts them all. */
    Op mp_op = Op::IDLE;
    int mp_lun = 0;
    std::vector<int64_t> mp_rows;
    bool mp_bad = false;       /* an address rule was broken: the operation does nothing and FAILs */
    int64_t col = 0;           /* register column for data in/out */
    uint8_t feature_addr = 0;
    uint8_t feature_param[4] = {};
    int pending_mode = -1;     /* SET FEATURES timing mode, applied when tFEAT ends */
    int feature_n = 0;

    /* data out */
    Out out = Out::NONE;
    int64_t out_ptr = 0;
    /* What 00h (after status polling) and CHANGE READ COLUMN return to: the
     * page register, or the parameter page after READ PARAMETER PAGE (ONFI
     * lets the host move the column within it to reach the redundant copies). */
    bool param_source = false;
    bool drive = false;        /* DQ driven */
    uint8_t out_byte = 0;      /* byte of the current RE# cycle */
    uint8_t hold_byte = 0;     /* the previous cycle's byte, held tRLOH after the fall (EDO) */
    bool hold_valid = false;
    int64_t out_valid_ps = NEVER;  /* when it becomes valid on DQ */
    bool out_pending = false;  /* a byte whose valid window has not closed yet */
    bool out_by_cea = false;
    std::vector<uint8_t> id_bytes, id_out, param_page;
    uint8_t sr_wp = 0;

    std::vector<Lun> luns;

    /* scheduled faults */
    std::vector<int64_t> fail_prog_rows, fail_erase_blocks, fail_prog_nth, fail_erase_nth;
    int64_t n_prog = 0, n_erase = 0;   /* since power-on, for *_nth and cuts */
    int64_t cut_at_ps = NEVER, cut_prog_k = 0, cut_erase_k = 0;
    int64_t cut_kind = 0, cut_kind_k = 0, n_prog_kind = 0;  /* cut in the cut_kind_k-th program of kind cut_kind */
    double cut_progress = 0.5;
    bool powered = false;
    bool power_lost = false;
    double ber = 0;

    /* ---- helpers */
    void msg(const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    void protocol_error(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void media_violation(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void check_min(int param, int64_t measured_ps);
    int64_t req_ps(int param) const {
        if (param == T_CCS) return cfg.t_ccs_ns * 1000;
        if (param < T_DDR2 && ddr() && af_onfi_ddr2_for_sdr[param] >= 0) param = T_DDR2 + af_onfi_ddr2_for_sdr[param];
        if (param >= T_DDR2) return af_onfi_ddr2_timing_ps[param - T_DDR2][ddr() ? mode : 0];
        return int64_t(af_onfi_timing_ns[param][ddr() ? 0 : mode]) * 1000;
    }
    /* An SDR check in the interface in use: the NV-DDR2 parameter it becomes, or -1. */
    int active(int param) const {
        if (!ddr() || param == T_CCS || param >= T_DDR2) return param;
        int d = af_onfi_ddr2_for_sdr[param];
        return d < 0 ? -1 : T_DDR2 + d;
    }
    int64_t trloh_ps() const { return ddr() ? 0 : int64_t(af_onfi_trloh_ns[mode]) * 1000; }
    const char *param_name(int param) const {
        return param == T_CCS ? "tCCS" : param >= T_DDR2 ? af_onfi_ddr2_timing_name[param - T_DDR2] : af_onfi_timing_name[param];
    }
    const char *iface_name() const { return ddr() ? "NV-DDR2" : "SDR"; }

    bool load_config();
    bool open_image();
    void close_image();
    void build_id_and_param_page();
    void tracef(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void write_stats();

    int64_t block_index(int lun, int64_t block) const { return lun * cfg.blocks_per_lun + block; }
    uint8_t *page_data(int64_t pidx) { return data + pidx * page_bytes; }
    bool decode_row(int64_t row, int &lun, int64_t &block, int64_t &page);
    int64_t page_index(int64_t row) {
        int lun; int64_t b, p;
        decode_row(row, lun, b, p);
        return block_index(lun, b) * cfg.pages_per_block + p;
    }
    int64_t paired_lower(int64_t page) const;
    int plane_of_row(int64_t row) const { return int((row >> page_bits) & (planes - 1)); }

    bool any_busy() const {
        for (auto &l : luns) if (l.op != Op::IDLE) return true;
        return false;
    }
    bool lun_busy(const Lun &l) const { return l.op != Op::IDLE && now >= l.start_ps; }
    uint8_t status_of(int lun);

    /* bus events */
    void on_we_fall();
    void on_we_rise(uint32_t old);
    void on_re_fall();
    void on_re_rise();
    void on_ce_fall();
    void on_ce_rise();
    void on_dqs_edge(bool rising, uint32_t old);
    void on_dqs_release();
    void ddr_re_edge(bool rising);
    void ddr_stop_output();
    void check_itc();
    void first_read_cycle();
    void end_out_byte();
    void latch_cmd(uint8_t c);
    void latch_addr(uint8_t a);
    void latch_data(uint8_t d);
    void abort_sequence(const char *why);
    bool finish_addresses();
    uint8_t next_out_byte();
    bool mp_rules_hold(Op op, int lun, int64_t row);
    void mp_queue(Op op, int lun, int64_t row);
    std::vector<int64_t> mp_finish(Op op, int lun, int64_t row);
    void mp_drop() { mp_op = Op::IDLE; mp_rows.clear(); mp_bad = false; }

    /* array operations */
    void start_op(int lun, Op op, int64_t row, int64_t t_op_ns);
    void complete_op(Lun &l);
    void run_until(int64_t t);
    void do_read(Lun &l, bool copyback);
    void do_program_start(int lun, const std::vector<int64_t> &rows, bool copyback);
    void do_erase_start(int lun, const std::vector<int64_t> &rows);
    void apply_program(Lun &l, double progress);
    void apply_erase(Lun &l, double progress);
    void tear_page(int64_t pidx, const uint8_t *newdata, double progress, bool mark_torn);
    void power_cut(const char *why);
    int64_t next_deadline();
    uint32_t outputs();
};

void NandModel::msg(const char *kind, const char *fmt, ...) {
    if (!cfg.verbose) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("nand%d: %.3f ns: %s: %s\n", index, now / 1000.0, kind, buf);
    fflush(stdout);
}

void NandModel::protocol_error(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    st.protocol_errors++;
    if ((int64_t)st.error_log.size() < cfg.log_limit) {
        char line[600];
        snprintf(line, sizeof line, "%.3f ns: %s", now / 1000.0, buf);
        st.error_log.push_back(line);
    }
    msg("PROTOCOL ERROR", "%s", buf);
    if (cfg.strict) strict_fatal = true;
}

void NandModel::media_violation(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    st.media_violations++;
    if ((int64_t)st.error_log.size() < cfg.log_limit) {
        char line[600];
        snprintf(line, sizeof line, "%.3f ns: media: %s", now / 1000.0, buf);
        st.error_log.push_back(line);
    }
    msg("MEDIA RULE", "%s", buf);
    if (cfg.strict) strict_fatal = true;
}

void NandModel::check_min(int param, int64_t measured_ps) {
    param = active(param);
    if (param < 0) return;
    int64_t required = req_ps(param);
    if (measured_ps >= required) return;
    st.timing[param]++;
    st.timing_total++;
    if ((int64_t)st.timing_log.size() < cfg.log_limit)
        st.timing_log.push_back({param_name(param), measured_ps, required, now});
    msg("TIMING VIOLATION", "%s measured %.3f ns < required %.3f ns (%s mode %d)", param_name(param),
        measured_ps / 1000.0, required / 1000.0, iface_name(), mode);
    if (cfg.strict) strict_fatal = true;
}

void NandModel::tracef(const char *fmt, ...) {
    if (!trace) return;
    fprintf(trace, "%14.3f ns  ", now / 1000.0);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(trace, fmt, ap);
    va_end(ap);
    fputc('\n', trace);
}

/* ---------------------------------------------------------- configuration */

bool NandModel::load_config() {
    cfg = NandConfig();
    char img[64];
    snprintf(img, sizeof img, "nand%d.img", index);
    cfg.image = img;
    std::vector<std::pair<std::string, std::string>> kv;
    if (!config_path.empty()) {
        std::ifstream f(config_path);
        if (!f) {
            printf("nand%d: ERROR: cannot read config %s\n", index, config_path.c_str());
            return false;
        }
        std::string line;
        while (std::getline(f, line)) {
            size_t h = line.find('#');
            if (h != std::string::npos) line.resize(h);
            line = trim(line);
            if (line.empty()) continue;
            size_t eq = line.find('=');
            if (eq == std::string::npos) {
                printf("nand%d: ERROR: config line without '=': %s\n", index, line.c_str());
                return false;
            }
            kv.emplace_back(trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
        }
    }
    std::stringstream ss(overrides);
    std::string item;
    while (std::getline(ss, item, ';')) {
        item = trim(item);
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string::npos) {
            printf("nand%d: ERROR: override without '=': %s\n", index, item.c_str());
            return false;
        }
        kv.emplace_back(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
    }
    /* The profile sets defaults; every other key overrides it wherever it appears. */
    for (auto &p : kv)
        if (p.first == "profile" && !nand_config_set(cfg, p.first, p.second)) {
            printf("nand%d: ERROR: unknown profile %s\n", index, p.second.c_str());
            return false;
        }
    for (auto &p : kv)
        if (p.first != "profile" && !nand_config_set(cfg, p.first, p.second)) {
            printf("nand%d: ERROR: bad config entry %s = %s\n", index, p.first.c_str(), p.second.c_str());
            return false;
        }
    if (cfg.page_data <= 0 || cfg.page_spare < 0 || cfg.pages_per_block <= 0 || cfg.blocks_per_lun <= 0 ||
        cfg.luns <= 0 || (cfg.pages_per_block & (cfg.pages_per_block - 1)) || cfg.clk_period_ps <= 0 ||
        cfg.timing_mode < 0 || cfg.timing_mode >= AF_ONFI_MODES || cfg.nop < 1 ||
        (cfg.mlc_paired && cfg.pages_per_block < 4)) {
        printf("nand%d: ERROR: inconsistent geometry/timing in config\n", index);
        return false;
    }
    /* Planes come with the profile (NandProfile.planes, generated). */
    planes = cfg.profile == "small" ? AF_NAND_PLANES_SMALL : cfg.profile == "realistic" ? AF_NAND_PLANES_REALISTIC : 0;
    if (planes < 1 || (planes & (planes - 1))) {
        printf("nand%d: ERROR: no power-of-two plane count for profile %s in atomflash_spec.h\n", index,
               cfg.profile.c_str());
        return false;
    }
    plane_bits = 0;
    while ((1 << plane_bits) < planes) plane_bits++;
    return true;
}

/* ------------------------------------------------------------------ image */

bool NandModel::open_image() {
    page_bytes = cfg.page_data + cfg.page_spare;
    blocks = cfg.luns * cfg.blocks_per_lun;
    pages = blocks * cfg.pages_per_block;
    page_bits = bits_for(cfg.pages_per_block);
    block_bits = bits_for(cfg.blocks_per_lun);
    if (page_bits + block_bits + bits_for(cfg.luns) > 24) {
        printf("nand%d: ERROR: geometry needs more than 3 row address cycles\n", index);
        return false;
    }
    auto align = [](uint64_t n) { return (n + AF_NANDIMG_ALIGN - 1) / AF_NANDIMG_ALIGN * AF_NANDIMG_ALIGN; };
    uint64_t boff = AF_NANDIMG_ALIGN;
    uint64_t poff = align(boff + blocks * sizeof(af_nandimg_block_t));
    uint64_t doff = align(poff + pages * sizeof(af_nandimg_page_t));
    uint64_t size = doff + uint64_t(pages) * page_bytes;

    fd = ::open(cfg.image.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        printf("nand%d: ERROR: cannot open image %s: %s\n", index, cfg.image.c_str(), strerror(errno));
        return false;
    }
    struct stat sb;
    fstat(fd, &sb);
    bool fresh = sb.st_size == 0;
    if (fresh && ftruncate(fd, size) != 0) {
        printf("nand%d: ERROR: cannot size image: %s\n", index, strerror(errno));
        return false;
    }
    if (!fresh && uint64_t(sb.st_size) < size) {
        printf("nand%d: ERROR: image %s is smaller than the configured geometry needs\n", index, cfg.image.c_str());
        return false;
    }
    map_size = size;
    map = (uint8_t *)mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        map = nullptr;
        printf("nand%d: ERROR: mmap failed: %s\n", index, strerror(errno));
        return false;
    }
    hdr = (af_nandimg_header_t *)map;
    btab = (af_nandimg_block_t *)(map + boff);
    ptab = (af_nandimg_page_t *)(map + poff);
    data = map + doff;
    if (fresh) {
        hdr->version = AF_NANDIMG_VERSION;
        hdr->header_bytes = AF_NANDIMG_ALIGN;
        hdr->page_data = cfg.page_data;
        hdr->page_spare = cfg.page_spare;
        hdr->pages_per_block = cfg.pages_per_block;
        hdr->blocks_per_lun = cfg.blocks_per_lun;
        hdr->luns = cfg.luns;
        hdr->bits_per_cell = cfg.mlc_paired ? 2 : 1;
        hdr->block_table_off = boff;
        hdr->page_table_off = poff;
        hdr->data_off = doff;
        hdr->seed = cfg.seed;
        /* Factory bad blocks: ONFI marks them with a non-FFh first spare byte in the first page. */
        Rng brng;
        brng.seed(uint64_t(cfg.seed) ^ 0xbadb10c5ull);
        std::vector<int64_t> bad;
        for (auto &lb : parse_list(cfg.bad_blocks))
            if (lb.size() == 2 && lb[0] < cfg.luns && lb[1] < cfg.blocks_per_lun) bad.push_back(block_index(lb[0], lb[1]));
        for (int64_t b = 0; b < blocks; b++)
            if (cfg.bad_block_rate > 0 && brng.uniform() < cfg.bad_block_rate) bad.push_back(b);
        for (int64_t b : bad) {
            btab[b].flags |= AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK;
            int64_t pidx = b * cfg.pages_per_block;
            memset(page_data(pidx), 0xFF, page_bytes);
            page_data(pidx)[cfg.page_data] = 0x00;
            ptab[pidx].flags = AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK;
        }
        __sync_synchronize();
        hdr->magic = AF_NANDIMG_MAGIC;  /* last: a half-created image is recognisably not one */
    } else if (hdr->magic != AF_NANDIMG_MAGIC || hdr->version != AF_NANDIMG_VERSION ||
               hdr->page_data != cfg.page_data || hdr->page_spare != cfg.page_spare ||
               hdr->pages_per_block != cfg.pages_per_block || hdr->blocks_per_lun != cfg.blocks_per_lun ||
               hdr->luns != cfg.luns || hdr->data_off != doff) {
        printf("nand%d: ERROR: image %s does not match the configured geometry\n", index, cfg.image.c_str());
        return false;
    }
    hdr->power_ons++;
    rng.seed(uint64_t(cfg.seed) * 0x2545F4914F6CDD1Dull + hdr->power_ons);
    /* A program that was under way when the last process died is torn now. */
    std::vector<uint8_t> ff(page_bytes, 0xFF);
    for (int64_t i = 0; i < pages; i++)
        if (ptab[i].flags & AF_NANDIMG_PAGE_FLAGS_IN_PROGRESS_MASK) {
            tear_page(i, ff.data(), 0.0, true);
            ptab[i].flags &= ~AF_NANDIMG_PAGE_FLAGS_IN_PROGRESS_MASK;
        }
    return true;
}

void NandModel::close_image() {
    if (map) {
        msync(map, map_size, MS_SYNC);
        munmap(map, map_size);
        map = nullptr;
    }
    if (fd >= 0) {
        ::close(fd);
        fd = -1;
    }
}

bool NandModel::decode_row(int64_t row, int &lun, int64_t &block, int64_t &page) {
    page = row & ((int64_t(1) << page_bits) - 1);
    block = (row >> page_bits) & ((int64_t(1) << block_bits) - 1);
    lun = int(row >> (page_bits + block_bits));
    return lun < cfg.luns && block < cfg.blocks_per_lun && page < cfg.pages_per_block;
}

int64_t NandModel::paired_lower(int64_t page) const {
    /* The spec's pairing (spec.mlc_paired_lower, generated): -1 for a lower page. */
    return af_mlc_paired_lower(page, cfg.pages_per_block);
}

/* -------------------------------------------------- ID and parameter page */

void NandModel::build_id_and_param_page() {
    id_bytes.clear();
    std::stringstream ss(cfg.id_bytes);
    std::string item;
    while (std::getline(ss, item, ',')) id_bytes.push_back(uint8_t(strtoul(trim(item).c_str(), nullptr, 16)));

    uint8_t p[256] = {};
    auto put16 = [&](int o, uint32_t v) { p[o] = v & 0xFF; p[o + 1] = (v >> 8) & 0xFF; };
    auto put32 = [&](int o, uint32_t v) { put16(o, v & 0xFFFF); put16(o + 2, v >> 16); };
    auto putstr = [&](int o, int n, const std::string &s) {
        for (int i = 0; i < n; i++) p[o + i] = i < (int)s.size() ? uint8_t(s[i]) : ' ';
    };
    memcpy(p, "ONFI", 4);
    /* What the part claims is exactly what it does (tb/nand_model tests every
     * bit): the ONFI revision whose timing tables it enforces, ... */
    put16(AF_ONFI_PARAM_REVISION, 1u << AF_ONFIREVISION_ONFI_4_0);
    /* ... the features it has (copyback takes any source and target page) ... */
    uint32_t multi_plane = planes > 1 ? (1u << AF_ONFIPARAMFEATURE_MULTI_PLANE_PROGRAM_ERASE) |
                                            (1u << AF_ONFIPARAMFEATURE_MULTI_PLANE_READ) : 0;
    put16(AF_ONFI_PARAM_FEATURES, (cfg.luns > 1 ? 1u << AF_ONFIPARAMFEATURE_MULTI_LUN : 0) |
                                      (cfg.sequential_pages ? 0 : 1u << AF_ONFIPARAMFEATURE_NON_SEQUENTIAL_PROGRAM) |
                                      (1u << AF_ONFIPARAMFEATURE_ODD_TO_EVEN_COPYBACK) |
                                      ((cfg.nvddr2_modes & 0xFF) ? 1u << AF_ONFIPARAMFEATURE_NV_DDR2 : 0) | multi_plane);
    /* ... and the optional commands it accepts. */
    put16(AF_ONFI_PARAM_OPT_COMMANDS, (1u << AF_ONFIOPTCOMMAND_GET_SET_FEATURES) |
                                          (1u << AF_ONFIOPTCOMMAND_READ_STATUS_ENHANCED) |
                                          (1u << AF_ONFIOPTCOMMAND_COPYBACK) |
                                          (1u << AF_ONFIOPTCOMMAND_CHANGE_READ_COLUMN_ENHANCED) |
                                          (1u << AF_ONFIOPTCOMMAND_CHANGE_ROW_ADDRESS));
    p[AF_ONFI_PARAM_PARAM_PAGES] = AF_ONFI_PARAM_COPIES;
    putstr(32, 12, cfg.manufacturer);
    putstr(44, 20, cfg.model);
    p[64] = id_bytes.empty() ? 0 : id_bytes[0];
    put32(80, uint32_t(cfg.page_data));
    put16(84, uint32_t(cfg.page_spare));
    put32(86, uint32_t(cfg.page_data));             /* obsolete partial page: whole page */
    put16(90, uint32_t(cfg.page_spare));
    put32(92, uint32_t(cfg.pages_per_block));
    put32(96, uint32_t(cfg.blocks_per_lun));
    p[100] = uint8_t(cfg.luns);
    p[101] = uint8_t((2 << 4) | 3);                 /* 2 column, 3 row address cycles */
    p[102] = cfg.mlc_paired ? 2 : 1;                /* bits per cell */
    put16(103, uint32_t(std::max<int64_t>(1, cfg.blocks_per_lun / 50)));  /* max bad blocks per LUN */
    /* block endurance: value x 10^exponent */
    {
        int64_t e = cfg.endurance ? cfg.endurance : 100000;
        int exp = 0;
        while (e >= 256) { e /= 10; exp++; }
        p[AF_ONFI_PARAM_ENDURANCE_VALUE] = uint8_t(e);
        p[AF_ONFI_PARAM_ENDURANCE_EXPONENT] = uint8_t(exp);
    }
    p[107] = 1;                                     /* guaranteed valid blocks at target start */
    put16(108, 0);
    p[110] = uint8_t(cfg.nop);                      /* programs per page */
    p[112] = 0;                                     /* ECC bits: the controller decides */
    p[AF_ONFI_PARAM_PLANE_ADDR_BITS] = uint8_t(plane_bits);
    /* Concurrent planes, block address restrictions, no multi-plane cache operations. */
    p[AF_ONFI_PARAM_MULTI_PLANE_ATTR] = 0;
    p[128] = 10;                                    /* I/O pin capacitance (pF) */
    put16(129, uint32_t(cfg.timing_modes));
    put16(131, 0);
    put16(133, uint32_t((cfg.t_prog_ns + 999) / 1000));
    put16(135, uint32_t((cfg.t_bers_ns + 999) / 1000));
    put16(137, uint32_t((cfg.t_r_ns + 999) / 1000));
    put16(139, uint32_t(cfg.t_ccs_ns));
    p[AF_ONFI_PARAM_NVDDR2_MODES] = uint8_t(cfg.nvddr2_modes);
    p[AF_ONFI_PARAM_NVDDR2_FEATURES] = 0;           /* single-ended DQS and RE#, no ODT */
    put16(164, 1);                                  /* vendor revision */
    put16(254, onfi_crc16(p, 254));
    param_page.clear();
    for (int copy = 0; copy < AF_ONFI_PARAM_COPIES; copy++) param_page.insert(param_page.end(), p, p + 256);
}

/* ---------------------------------------------------------- power on/off */

void NandModel::power_on(int64_t cycle) {
    config_ok = load_config() && open_image();
    period_ps = cfg.clk_period_ps;
    cycle0 = cycle;
    now = 0;
    mode = int(cfg.timing_mode);
    iface = AF_ONFIINTERFACE_SDR;
    pending_iface = pending_mode = -1;
    t_itc_ref = LONG_AGO;
    dqs_edges = dq_since_dqs = dqs_sdr_reported = false;
    t_dqs_edge = t_dqs_rise = t_dqs_fall = t_dqs_low = LONG_AGO;
    dqs_q.clear();
    dqs_out = ddr_valid = re_pre = false;
    luns.assign(cfg.luns, Lun());
    for (auto &l : luns) {
        l.regs.assign(planes, std::vector<uint8_t>(page_bytes > 0 ? page_bytes : 1, 0xFF));
        l.reg_valid.assign(planes, 0);
        l.plane_fail.assign(planes, 0);
    }
    mp_drop();
    status_plane = -1;
    st = Stats();
    n_prog = n_erase = 0;
    have_cmd = in_data = false;
    addr.clear();
    out = Out::NONE;
    drive = false;
    out_pending = false;
    power_lost = false;
    powered = config_ok;
    ber = cfg.bit_error_rate;
    fail_prog_rows.clear();
    fail_erase_blocks.clear();
    fail_prog_nth.clear();
    fail_erase_nth.clear();
    t_ce_fall = t_ce_rise = t_cle_chg = t_cle_fall = t_ale_chg = t_ale_fall = t_dq_chg = LONG_AGO;
    t_we_fall = t_we_rise = t_re_fall = t_re_rise = t_ready = t_wb_ref = t_addr_rise = t_ccs_ref = LONG_AGO;
    last_latch = Latch::NONE;
    first_eval = true;
    if (!config_ok) {
        printf("nand%d: ERROR: model not powered (configuration or image problem)\n", index);
        strict_fatal = true;
        return;
    }
    for (auto &v : parse_list(cfg.fail_program))
        if (v.size() == 3) fail_prog_rows.push_back(block_index(int(v[0]), v[1]) * cfg.pages_per_block + v[2]);
    for (auto &v : parse_list(cfg.fail_erase))
        if (v.size() == 2) fail_erase_blocks.push_back(block_index(int(v[0]), v[1]));
    for (auto &v : parse_list(cfg.fail_program_nth)) if (!v.empty()) fail_prog_nth.push_back(v[0]);
    for (auto &v : parse_list(cfg.fail_erase_nth)) if (!v.empty()) fail_erase_nth.push_back(v[0]);
    cut_at_ps = cfg.power_cut_ns >= 0 ? cfg.power_cut_ns * 1000 : NEVER;
    cut_prog_k = cfg.power_cut_program;
    cut_erase_k = cfg.power_cut_erase;
    cut_kind = cfg.power_cut_kind & 0xFF;
    cut_kind_k = cut_kind ? std::max<int64_t>(1, cfg.power_cut_kind_nth) : 0;
    n_prog_kind = 0;
    cut_progress = std::min(1.0, std::max(0.0, cfg.power_cut_progress));
    stats_path = cfg.stats.empty() ? cfg.image + ".stats.json" : cfg.stats;
    if (trace) fclose(trace);
    trace = cfg.trace.empty() ? nullptr : fopen(cfg.trace.c_str(), "a");
    build_id_and_param_page();
    open_ = true;
    /* Power-on: the target resets itself (R/B# low for tRST is optional; ready at once here). */
    msg("info", "powered on: %" PRId64 "+%" PRId64 " B pages, %" PRId64 " pages/block, %" PRId64
        " blocks/LUN, %" PRId64 " LUN(s), image %s (power-on #%" PRIu64 ")",
        cfg.page_data, cfg.page_spare, cfg.pages_per_block, cfg.blocks_per_lun, cfg.luns, cfg.image.c_str(),
        hdr->power_ons);
}

void NandModel::shutdown() {
    if (!open_) return;
    write_stats();
    if (trace) {
        fclose(trace);
        trace = nullptr;
    }
    close_image();
    open_ = false;
}

void NandModel::write_stats() {
    if (!open_ && !map) return;
    std::string tmp = stats_path + ".tmp";
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f) return;
    fprintf(f, "{\n  \"instance\": %d,\n  \"image\": \"%s\",\n  \"time_ns\": %.3f,\n  \"timing_mode\": %d,\n"
               "  \"interface\": \"%s\",\n", index, cfg.image.c_str(), now / 1000.0, mode, iface_name());
    fprintf(f, "  \"reads\": %" PRIu64 ",\n  \"programs\": %" PRIu64 ",\n  \"erases\": %" PRIu64 ",\n", st.reads,
            st.programs, st.erases);
    fprintf(f, "  \"multi_plane_ops\": %" PRIu64 ",\n", st.multi_plane_ops);
    fprintf(f, "  \"programs_by_kind\": {");
    bool first_kind = true;
    for (unsigned k = 0; k < 256; k++) {
        if (!st.programs_kind[k]) continue;
        const char *name = af_kind_name(k);
        char hex[8];
        if (!strcmp(name, "?")) snprintf(hex, sizeof hex, "0x%02x", k), name = hex;
        fprintf(f, "%s\"%s\": %" PRIu64, first_kind ? "" : ", ", name, st.programs_kind[k]);
        first_kind = false;
    }
    fprintf(f, "},\n");
    fprintf(f, "  \"bytes_in\": %" PRIu64 ",\n  \"bytes_out\": %" PRIu64 ",\n  \"commands\": %" PRIu64 ",\n",
            st.bytes_in, st.bytes_out, st.commands);
    fprintf(f, "  \"busy_ns\": [");
    for (size_t i = 0; i < luns.size(); i++) fprintf(f, "%s%.3f", i ? ", " : "", luns[i].busy_ps / 1000.0);
    fprintf(f, "],\n  \"violations_total\": %" PRIu64 ",\n  \"violations\": {", st.timing_total);
    bool first = true;
    for (int i = 0; i < T_COUNT; i++)
        if (st.timing[i]) {
            fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ", param_name(i), st.timing[i]);
            first = false;
        }
    fprintf(f, "},\n  \"violation_log\": [");
    for (size_t i = 0; i < st.timing_log.size(); i++) {
        auto &v = st.timing_log[i];
        fprintf(f, "%s\n    {\"param\": \"%s\", \"measured_ns\": %.3f, \"required_ns\": %.3f, \"t_ns\": %.3f}",
                i ? "," : "", v.param.c_str(), v.measured_ps / 1000.0, v.required_ps / 1000.0, v.t_ps / 1000.0);
    }
    fprintf(f, "],\n  \"protocol_errors\": %" PRIu64 ",\n  \"media_violations\": %" PRIu64
               ",\n  \"nop_violations\": %" PRIu64 ",\n  \"order_violations\": %" PRIu64 ",\n",
            st.protocol_errors, st.media_violations, st.nop_violations, st.order_violations);
    fprintf(f, "  \"error_log\": [");
    for (size_t i = 0; i < st.error_log.size(); i++) {
        std::string e;
        for (char c : st.error_log[i]) {
            if (c == '"' || c == '\\') e += '\\';
            e += c;
        }
        fprintf(f, "%s\n    \"%s\"", i ? "," : "", e.c_str());
    }
    fprintf(f, "],\n  \"bit_errors\": %" PRIu64 ",\n  \"program_fails\": %" PRIu64 ",\n  \"erase_fails\": %" PRIu64
               ",\n  \"power_lost\": %s,\n  \"power_ons\": %" PRIu64 "\n}\n",
            st.bit_errors, st.program_fails, st.erase_fails, power_lost ? "true" : "false", hdr ? hdr->power_ons : 0);
    fclose(f);
    rename(tmp.c_str(), stats_path.c_str());
}

/* ---------------------------------------------------------------- status */

uint8_t NandModel::status_of(int lun) {
    const Lun &l = luns[lun];
    bool busy = lun_busy(l);
    uint8_t s = 0;
    if (status_plane >= 0 ? l.plane_fail[status_plane] : l.status_fail) s |= 1u << AF_ONFISTATUS_FAIL;
    if (!busy) s |= (1u << AF_ONFISTATUS_ARDY) | (1u << AF_ONFISTATUS_RDY);
    if (pins & NAND_PIN_WP_N) s |= 1u << AF_ONFISTATUS_WP_N;
    return s;
}

/* ------------------------------------------------------------- bus events */

void NandModel::on_ce_fall() { t_ce_fall = now; }

void NandModel::on_ce_rise() {
    end_out_byte();
    ddr_stop_output();
    if (last_latch != Latch::NONE && !ce_since_latch && t_we_rise >= t_ce_fall) check_min(AF_ONFI_TCH, now - t_we_rise);
    ce_since_latch = true;
    t_ce_rise = now;
    drive = false;
}

void NandModel::on_we_fall() {
    end_out_byte();
    ddr_stop_output();
    check_itc();
    drive = false;
    check_min(AF_ONFI_TWH, now - t_we_rise);
    check_min(AF_ONFI_TWC, now - t_we_fall);
    if (t_re_rise > t_we_rise) check_min(AF_ONFI_TRHW, now - t_re_rise);
    if (t_wb_ref > LONG_AGO && now - t_wb_ref < req_ps(AF_ONFI_TWB))
        check_min(AF_ONFI_TWB, now - t_wb_ref);
    t_we_fall = now;
}

void NandModel::on_we_rise(uint32_t old) {
    bool cle = old & NAND_PIN_CLE, ale = old & NAND_PIN_ALE;
    uint8_t dq = uint8_t(old >> NAND_PIN_DQ_SHIFT);
    check_min(AF_ONFI_TWP, now - t_we_fall);
    check_min(AF_ONFI_TCS, now - t_ce_fall);
    check_min(AF_ONFI_TDS, now - t_dq_chg);
    if (cle) check_min(AF_ONFI_TCLS, now - t_cle_chg);
    if (ale) check_min(AF_ONFI_TALS, now - t_ale_chg);
    t_we_rise = now;
    cle_since_latch = ale_since_latch = dq_since_latch = ce_since_latch = re_since_latch = false;
    if (cle && ale) {
        protocol_error("CLE and ALE both high at a WE# rising edge (DQ %02Xh ignored)", dq);
        last_latch = Latch::NONE;
        return;
    }
    if (cle) {
        last_latch = Latch::CMD;
        latch_cmd(dq);
    } else if (ale) {
        last_latch = Latch::ADDR;
        t_addr_rise = now;
        data_since_addr = false;
        latch_addr(dq);
    } else if (ddr()) {
        protocol_error("a WE# data cycle (DQ %02Xh) while the interface is NV-DDR2, where DQS latches data", dq);
        last_latch = Latch::NONE;
    } else {
        if (!data_since_addr && last_latch == Latch::ADDR) {
            /* First data cycle after addresses: tCCS after a CHANGE WRITE COLUMN, tADL otherwise. */
            bool ccs = have_cmd && cmd == AF_ONFICMD_CHANGE_WRITE_COL && addr.size() == 2 && !in_data;
            check_min(ccs ? T_CCS : AF_ONFI_TADL, now - t_addr_rise);
        }
        data_since_addr = true;
        last_latch = Latch::DATA;
        latch_data(dq);
    }
}

/* ---- NV-DDR2 (ONFI 4.0).  Commands and addresses are latched by WE# as in
 * SDR, with the NV-DDR2 table's times.  Data input: the host drives DQS low
 * (the preamble, tWPRE), then every DQS edge latches the DQ byte before it
 * (tDS/tDH, edges tDQSH/tDQSL apart, tRC per cycle); after the last edge DQS
 * stays put for tWPST before the host lets go.  Data output: RE# falls (the
 * preamble, tRPRE before its first rise), the part drives DQS low, and every
 * RE# edge from the next rise on makes DQS follow tDQSRE later with the next
 * byte on DQ, edge-aligned.  The column moves on every edge: a burst ends
 * with the next command or CE# high, and a host resuming a page after a
 * pause names the column again (CHANGE READ COLUMN).  READ ID, the
 * parameter page and features move each byte on two edges (both copies equal
 * on input); status repeats on every edge.  RESET leaves NV-DDR2 for SDR
 * mode 0, the one way back ONFI gives. */

/* The first RE# fall after a command/address/data cycle: the times since the
 * latch, and 00h alone (after status polling) returning to data output. */
void NandModel::first_read_cycle() {
    if (t_ccs_ref == t_we_rise) check_min(T_CCS, now - t_we_rise);
    else if (last_latch == Latch::CMD || last_latch == Latch::ADDR) check_min(AF_ONFI_TWHR, now - t_we_rise);
    check_min(AF_ONFI_TAR, now - t_ale_fall);
    check_min(AF_ONFI_TCLR, now - t_cle_fall);
    if (t_ready > t_we_rise) check_min(AF_ONFI_TRR, now - t_ready);
    if (t_wb_ref > LONG_AGO && now - t_wb_ref < req_ps(AF_ONFI_TWB)) check_min(AF_ONFI_TWB, now - t_wb_ref);
    t_re_fall = now;
    re_since_latch = true;
    if (have_cmd && cmd == AF_ONFICMD_READ_1 && addr.empty() && !in_data) {
        have_cmd = false;
        Lun &l = luns[sel_lun];
        out = param_source ? Out::PARAM : l.reg_valid[l.cur] ? Out::DATA : Out::NONE;
    }
}

void NandModel::check_itc() {
    if (t_itc_ref == LONG_AGO) return;
    check_min(T_DDR2 + AF_ONFI_DDR2_TITC, now - t_itc_ref);
    t_itc_ref = LONG_AGO;
}

void NandModel::ddr_stop_output() {
    dqs_q.clear();
    dqs_out = ddr_valid = re_pre = false;
}

void NandModel::on_dqs_edge(bool rising, uint32_t old) {
    if (!ddr()) {
        if (!dqs_sdr_reported) protocol_error("DQS toggles while the interface is SDR");
        dqs_sdr_reported = true;
        return;
    }
    if (!dqs_edges && !rising) {
        t_dqs_low = t_dqs_fall = now;   /* the preamble begins */
        return;
    }
    if (!dqs_edges) {
        check_min(T_DDR2 + AF_ONFI_DDR2_TWPRE, now - t_dqs_low);
        if (!data_since_addr && last_latch == Latch::ADDR) {
            bool ccs = have_cmd && cmd == AF_ONFICMD_CHANGE_WRITE_COL && addr.size() == 2 && !in_data;
            check_min(ccs ? T_CCS : AF_ONFI_TADL, now - t_addr_rise);
        }
    } else {
        check_min(T_DDR2 + (rising ? AF_ONFI_DDR2_TDQSL : AF_ONFI_DDR2_TDQSH), now - t_dqs_edge);
        check_min(T_DDR2 + AF_ONFI_DDR2_TRC, now - (rising ? t_dqs_rise : t_dqs_fall));
    }
    check_min(T_DDR2 + AF_ONFI_DDR2_TDS, now - t_dq_chg);
    dqs_edges = true;
    dq_since_dqs = false;
    t_dqs_edge = now;
    (rising ? t_dqs_rise : t_dqs_fall) = now;
    data_since_addr = true;
    last_latch = Latch::DATA;
    uint8_t dq = uint8_t(old >> NAND_PIN_DQ_SHIFT);
    if (have_cmd && cmd == AF_ONFICMD_SET_FEATURES && in_data) {
        if (feature_copy == 0) {
            feature_copy = 1;
            feature_param[feature_n] = dq;
            return;
        }
        feature_copy = 0;
        if (dq != feature_param[feature_n])
            protocol_error("NV-DDR2 SET FEATURES: the two copies of parameter byte %d differ (%02Xh, %02Xh)",
                           feature_n + 1, feature_param[feature_n], dq);
    }
    latch_data(dq);
}

void NandModel::on_dqs_release() {
    if (dqs_edges) check_min(T_DDR2 + AF_ONFI_DDR2_TWPST, now - t_dqs_edge);
    dqs_edges = false;
}

void NandModel::ddr_re_edge(bool rising) {
    int64_t dqsre = cfg.t_dqsre_ps;
    if (!re_pre) {
        if (rising) return;   /* the fall before it was refused */
        /* The preamble: the first RE# fall after a latch, with SDR's first-read rules. */
        check_itc();
        first_read_cycle();
        if (out == Out::NONE) return (void)protocol_error("RE# read preamble with no data to output (last command %02Xh)", cmd);
        if (out != Out::STATUS && lun_busy(luns[sel_lun]))
            return (void)protocol_error("RE# read preamble while LUN %d is busy (%s)", sel_lun, op_name(luns[sel_lun].op));
        re_pre = true;
        t_re_pre = now;
        repeat_half = 0;
        dqs_q.push_back({now + std::min<int64_t>(dqsre, req_ps(T_DDR2 + AF_ONFI_DDR2_TDQSD)), -1, 0});
        return;
    }
    if (rising && t_re_rise < t_re_pre) {
        check_min(T_DDR2 + AF_ONFI_DDR2_TRPRE, now - t_re_pre);
    } else if (rising) {
        check_min(AF_ONFI_TRP, now - t_re_fall);
        check_min(AF_ONFI_TRC, now - t_re_rise);
    } else {
        check_min(AF_ONFI_TREH, now - t_re_rise);
        check_min(AF_ONFI_TRC, now - t_re_fall);
    }
    (rising ? t_re_rise : t_re_fall) = now;
    uint8_t b;
    if (out == Out::STATUS) {
        b = status_of(sel_lun);
    } else if (out == Out::ID || out == Out::PARAM || out == Out::FEATURES) {
        if (repeat_half == 0) {
            out_byte = next_out_byte();
            st.bytes_out++;
        }
        b = out_byte;
        repeat_half ^= 1;
    } else {
        b = next_out_byte();
        st.bytes_out++;
    }
    dqs_q.push_back({now + dqsre, rising ? 1 : 0, b});
}

void NandModel::end_out_byte() {
    /* The byte of the RE# cycle that just ended had [valid, now) to be sampled. */
    if (!out_pending) return;
    out_pending = false;
    /* The byte was readable in [out_valid_ps, this fall + tRLOH). */
    if (out_valid_ps > now + trloh_ps()) {
        int param = out_by_cea ? AF_ONFI_TCEA : AF_ONFI_TREA;
        int64_t ref = out_by_cea ? t_ce_fall : t_re_fall;
        /* Report as "the window closed after X while data needs Y". */
        int64_t measured = now - ref, required = req_ps(param);
        st.timing[param]++;
        st.timing_total++;
        if ((int64_t)st.timing_log.size() < cfg.log_limit) st.timing_log.push_back({param_name(param), measured, required, now});
        msg("TIMING VIOLATION", "%s: read cycle ended %.3f ns after %s fell, data is valid only after %.3f ns (mode %d)",
            param_name(param), measured / 1000.0, out_by_cea ? "CE#" : "RE#", required / 1000.0, mode);
        if (cfg.strict) strict_fatal = true;
    }
}

void NandModel::on_re_fall() {
    if (ddr()) return ddr_re_edge(false);
    /* EDO: the byte on DQ now (if valid) stays there for tRLOH. */
    hold_valid = drive && now >= out_valid_ps;
    if (hold_valid) hold_byte = out == Out::STATUS ? status_of(sel_lun) : out_byte;
    end_out_byte();
    check_min(AF_ONFI_TREH, now - t_re_rise);
    if (t_re_fall > t_we_rise) {
        check_min(AF_ONFI_TRC, now - t_re_fall);
        t_re_fall = now;
        re_since_latch = true;
    } else {
        first_read_cycle();
    }
    if (out == Out::NONE) {
        protocol_error("RE# read cycle with no data to output (last command %02Xh)", cmd);
        drive = false;
        return;
    }
    if (out != Out::STATUS && lun_busy(luns[sel_lun])) {
        protocol_error("RE# read cycle while LUN %d is busy (%s)", sel_lun, op_name(luns[sel_lun].op));
        drive = false;
        return;
    }
    out_byte = next_out_byte();
    st.bytes_out++;
    int64_t v_re = now + req_ps(AF_ONFI_TREA), v_ce = t_ce_fall + req_ps(AF_ONFI_TCEA);
    out_by_cea = v_ce > v_re;
    out_valid_ps = std::max(v_re, v_ce);
    out_pending = true;
    drive = true;
}

void NandModel::on_re_rise() {
    if (ddr()) return ddr_re_edge(true);
    check_min(AF_ONFI_TRP, now - t_re_fall);
    t_re_rise = now;
}

uint8_t NandModel::next_out_byte() {
    switch (out) {
    case Out::STATUS:
        return status_of(sel_lun);
    case Out::ID:
        return out_ptr < (int64_t)id_out.size() ? id_out[out_ptr++] : (out_ptr++, 0x00);
    case Out::PARAM: {
        uint8_t b = param_page[out_ptr % param_page.size()];
        out_ptr++;
        return b;
    }
    case Out::FEATURES:
        return out_ptr < 4 ? feature_param[out_ptr++] : 0x00;
    case Out::DATA: {
        Lun &l = luns[sel_lun];
        if (col >= page_bytes) {
            if (col == page_bytes) protocol_error("data output past the end of the page (column %" PRId64 ")", col);
            col++;
            return 0xFF;
        }
        return l.reg()[col++];
    }
    default:
        return 0;
    }
}

void NandModel::abort_sequence(const char *why) {
    protocol_error("%s", why);
    have_cmd = false;
    in_data = false;
    prog_seq = false;
    addr.clear();
    mp_drop();   /* a broken sequence ends the multi-plane operation it belonged to */
}

void NandModel::latch_cmd(uint8_t c) {
    st.commands++;
    /* Commands that are legal while a LUN is busy: status, reset. */
    if (c == AF_ONFICMD_RESET) {
        for (size_t i = 0; i < luns.size(); i++) {
            Lun &l = luns[i];
            if (l.op == Op::PROGRAM || l.op == Op::ERASE) {
                double progress = l.end_ps > l.start_ps ? double(std::max<int64_t>(0, now - l.start_ps)) / (l.end_ps - l.start_ps) : 0;
                msg("info", "RESET aborts the %s on LUN %zu at %.0f%%", op_name(l.op), i, progress * 100);
                if (l.op == Op::PROGRAM) apply_program(l, std::min(progress, 1.0));
                else apply_erase(l, std::min(progress, 1.0));
                l.status_fail = 1;
                for (auto &t : l.targets) l.plane_fail[t.plane] = 1;
            }
            if (l.op != Op::IDLE) l.busy_ps += std::max<int64_t>(0, now - l.start_ps);
            l.op = Op::IDLE;
            std::fill(l.reg_valid.begin(), l.reg_valid.end(), 0);
            l.copyback_ready = false;
        }
        have_cmd = in_data = false;
        addr.clear();
        mp_drop();
        out = Out::NONE;
        if (ddr()) {
            /* ONFI: RESET (FFh), issued in SDR timing mode 0, is the way back from NV-DDR2. */
            iface = AF_ONFIINTERFACE_SDR;
            mode = 0;
        }
        pending_iface = pending_mode = -1;
        t_itc_ref = LONG_AGO;
        tracef("RESET");
        start_op(0, Op::RESET, 0, cfg.t_rst_ns);
        return;
    }
    if (c == AF_ONFICMD_READ_STATUS) {
        if (have_cmd && in_data) {
            /* Status between data and confirm would lose the page register contents on real parts. */
            protocol_error("READ STATUS inside a %02Xh data-input sequence", cmd);
            have_cmd = in_data = false;
            addr.clear();
        }
        if (have_cmd && !(cmd == AF_ONFICMD_READ_1 && addr.empty())) abort_sequence("READ STATUS interrupts an incomplete command sequence");
        have_cmd = false;
        out = Out::STATUS;
        status_plane = -1;
        return;
    }
    if (c == AF_ONFICMD_READ_STATUS_ENH) {
        if (have_cmd) abort_sequence("READ STATUS ENHANCED interrupts an incomplete command sequence");
        have_cmd = true;
        cmd = c;
        addr.clear();
        return;
    }

    /* Second cycles (confirms) and 85h inside a program complete a sequence. */
    if (have_cmd && !finish_addresses()) return;
    if (have_cmd) {
        uint8_t first = cmd;
        size_t na = addr.size();
        int lun = 0;
        int64_t b = 0, pg = 0;
        int64_t row = na >= 5 ? (addr[2] | addr[3] << 8 | int64_t(addr[4]) << 16) : 0;
        if (first == AF_ONFICMD_READ_1 &&
            (c == AF_ONFICMD_READ_2 || c == AF_ONFICMD_COPYBACK_READ_2 || c == AF_ONFICMD_READ_MULTI_PLANE)) {
            if (na != 5) return abort_sequence("READ: expected 5 address cycles before the confirm");
            if (!decode_row(row, lun, b, pg)) return abort_sequence("READ: row address outside the array");
            if (luns[lun].op != Op::IDLE) return abort_sequence("READ to a busy LUN");
            if (c == AF_ONFICMD_COPYBACK_READ_2 && mp_op != Op::IDLE)
                return abort_sequence("COPYBACK READ inside a multi-plane sequence (multi-plane copyback is not modelled)");
            have_cmd = false;
            param_source = false;
            if (c == AF_ONFICMD_READ_MULTI_PLANE) {
                out = Out::NONE;
                return mp_queue(Op::READ, lun, row);
            }
            std::vector<int64_t> rows = mp_finish(Op::READ, lun, row);
            sel_lun = lun;
            col = addr[0] | addr[1] << 8;
            if (rows.empty()) {   /* a broken multi-plane rule: nothing read */
                out = Out::NONE;
                return;
            }
            Lun &l = luns[lun];
            l.cur = plane_of_row(row);
            out = Out::DATA;
            start_op(lun, c == AF_ONFICMD_READ_2 ? Op::READ : Op::COPYBACK_READ, row, cfg.t_r_ns);
            l.targets.clear();
            for (int64_t r : rows) {
                int lun2;
                int64_t b2, p2;
                decode_row(r, lun2, b2, p2);
                l.targets.push_back({r, plane_of_row(r), false, 0xFF});
                tracef("%s lun %d block %" PRId64 " page %" PRId64 " col %" PRId64 "%s",
                       c == AF_ONFICMD_READ_2 ? "READ" : "COPYBACK_READ", lun, b2, p2, col,
                       rows.size() > 1 ? " multi-plane" : "");
            }
            if (rows.size() > 1) st.multi_plane_ops++;
            return;
        }
        if (first == AF_ONFICMD_CHANGE_READ_COL_ENH && c == AF_ONFICMD_CHANGE_READ_COL_2) {
            /* CHANGE READ COLUMN ENHANCED: the row selects the LUN and plane (page and the
             * other block bits are not looked at), then data from the column after tCCS. */
            if (na != 5) return abort_sequence("CHANGE READ COLUMN ENHANCED: expected 5 address cycles");
            if (!decode_row(row, lun, b, pg)) return abort_sequence("CHANGE READ COLUMN ENHANCED: row address outside the array");
            have_cmd = false;
            Lun &l = luns[lun];
            if (lun_busy(l) || l.op != Op::IDLE)
                return (void)protocol_error("CHANGE READ COLUMN ENHANCED to LUN %d while it is busy (%s)", lun, op_name(l.op));
            sel_lun = lun;
            param_source = false;
            l.cur = plane_of_row(row);
            if (!l.reg_valid[l.cur]) {
                out = Out::NONE;
                return (void)protocol_error("CHANGE READ COLUMN ENHANCED: plane %d of LUN %d holds no page data", l.cur, lun);
            }
            col = addr[0] | addr[1] << 8;
            out = Out::DATA;
            t_ccs_ref = now;
            return;
        }
        if (first == AF_ONFICMD_CHANGE_READ_COL_1 && c == AF_ONFICMD_CHANGE_READ_COL_2) {
            if (na != 2) return abort_sequence("CHANGE READ COLUMN: expected 2 address cycles");
            have_cmd = false;
            if (param_source) {
                out = Out::PARAM;
                out_ptr = addr[0] | addr[1] << 8;
                t_ccs_ref = now;
                return;
            }
            if (!luns[sel_lun].reg_valid[luns[sel_lun].cur])
                return (void)protocol_error("CHANGE READ COLUMN without page data in the register");
            col = addr[0] | addr[1] << 8;
            out = Out::DATA;
            t_ccs_ref = now;
            return;
        }
        if ((first == AF_ONFICMD_PROGRAM_1 || first == AF_ONFICMD_CHANGE_WRITE_COL) && in_data &&
            c == AF_ONFICMD_CHANGE_WRITE_COL) {
            /* CHANGE WRITE COLUMN: 85h + column cycles; the sequence stays open. */
            cmd = c;
            addr.clear();
            in_data = false;
            return;
        }
        if ((first == AF_ONFICMD_PROGRAM_1 || first == AF_ONFICMD_CHANGE_WRITE_COL) &&
            (c == AF_ONFICMD_PROGRAM_2 || c == AF_ONFICMD_PROGRAM_MULTI_PLANE)) {
            if (!in_data && first == AF_ONFICMD_PROGRAM_1)
                return abort_sequence("PAGE PROGRAM: confirm without 5 address cycles");
            if (data_copyback && (c == AF_ONFICMD_PROGRAM_MULTI_PLANE || mp_op != Op::IDLE))
                return abort_sequence("COPYBACK PROGRAM in a multi-plane sequence (multi-plane copyback is not modelled)");
            have_cmd = in_data = prog_seq = false;
            Lun &l = luns[sel_lun];
            if (l.op != Op::IDLE) return abort_sequence("PAGE PROGRAM to a busy LUN");
            if (c == AF_ONFICMD_PROGRAM_MULTI_PLANE) return mp_queue(Op::PROGRAM, sel_lun, l.row);
            std::vector<int64_t> rows = mp_finish(Op::PROGRAM, sel_lun, l.row);
            if (!rows.empty()) do_program_start(sel_lun, rows, data_copyback);
            return;
        }
        if (first == AF_ONFICMD_ERASE_1 && (c == AF_ONFICMD_ERASE_2 || c == AF_ONFICMD_ERASE_MULTI_PLANE)) {
            if (na != 3) return abort_sequence("BLOCK ERASE: expected 3 row address cycles");
            row = addr[0] | addr[1] << 8 | int64_t(addr[2]) << 16;
            if (!decode_row(row, lun, b, pg)) return abort_sequence("BLOCK ERASE: row address outside the array");
            if (luns[lun].op != Op::IDLE) return abort_sequence("BLOCK ERASE to a busy LUN");
            have_cmd = false;
            sel_lun = lun;
            param_source = false;
            if (c == AF_ONFICMD_ERASE_MULTI_PLANE) return mp_queue(Op::ERASE, lun, row);
            std::vector<int64_t> rows = mp_finish(Op::ERASE, lun, row);
            if (!rows.empty()) do_erase_start(lun, rows);
            return;
        }
        char why[160];
        snprintf(why, sizeof why, "command %02Xh (%s) cannot follow %02Xh (%s) with %zu address cycle(s)", c,
                 af_onficmd_name(c), first, af_onficmd_name(first), na);
        abort_sequence(why);
        /* fall through: the new byte may start a sequence of its own */
    }

    switch (c) {
    case AF_ONFICMD_READ_1:
    case AF_ONFICMD_CHANGE_READ_COL_1:
    case AF_ONFICMD_CHANGE_READ_COL_ENH:
    case AF_ONFICMD_PROGRAM_1:
    case AF_ONFICMD_CHANGE_WRITE_COL:
    case AF_ONFICMD_ERASE_1:
    case AF_ONFICMD_READ_ID:
    case AF_ONFICMD_READ_PARAM_PAGE:
    case AF_ONFICMD_SET_FEATURES:
    case AF_ONFICMD_GET_FEATURES:
        if (any_busy() && (c == AF_ONFICMD_READ_ID || c == AF_ONFICMD_READ_PARAM_PAGE || c == AF_ONFICMD_SET_FEATURES ||
                           c == AF_ONFICMD_GET_FEATURES)) {
            protocol_error("command %02Xh (%s) while the target is busy", c, af_onficmd_name(c));
            return;
        }
        have_cmd = true;
        cmd = c;
        addr.clear();
        in_data = false;
        if (c == AF_ONFICMD_PROGRAM_1 || c == AF_ONFICMD_CHANGE_WRITE_COL) data_copyback = prog_seq = false;
        if (c == AF_ONFICMD_READ_1) out = Out::NONE;
        return;
    default:
        protocol_error("unsupported command %02Xh", c);
        have_cmd = false;
        return;
    }
}

void NandModel::latch_addr(uint8_t a) {
    if (!have_cmd) return (void)protocol_error("address cycle %02Xh without a command", a);
    addr.push_back(a);
    size_t n = addr.size();
    auto too_many = [&](size_t max) {
        if (n > max) {
            char why[120];
            snprintf(why, sizeof why, "%s: more than %zu address cycles", af_onficmd_name(cmd), max);
            abort_sequence(why);
            return true;
        }
        return false;
    };
    switch (cmd) {
    case AF_ONFICMD_READ_ID:
        if (too_many(1)) return;
        have_cmd = false;
        out_ptr = 0;
        if (a == 0x00) {
            id_out = id_bytes;
        } else if (a == 0x20) {
            id_out = {'O', 'N', 'F', 'I'};
        } else {
            out = Out::NONE;
            protocol_error("READ ID address %02Xh (supported: 00h, 20h)", a);
            return;
        }
        out = Out::ID;
        tracef("READ_ID %02X", a);
        return;
    case AF_ONFICMD_READ_PARAM_PAGE:
        if (too_many(1)) return;
        have_cmd = false;
        if (a != 0x00) {
            protocol_error("READ PARAMETER PAGE address %02Xh (supported: 00h)", a);
            return;
        }
        out = Out::PARAM;
        out_ptr = 0;
        sel_lun = 0;
        param_source = true;
        tracef("READ_PARAM_PAGE");
        start_op(0, Op::PARAM, 0, cfg.t_r_ns);
        return;
    case AF_ONFICMD_SET_FEATURES:
    case AF_ONFICMD_GET_FEATURES:
        if (too_many(1)) return;
        feature_addr = a;
        if (a != AF_ONFIFEATURE_TIMING_MODE) {
            have_cmd = false;
            protocol_error("%s feature address %02Xh (supported: %02Xh)", af_onficmd_name(cmd), a,
                           AF_ONFIFEATURE_TIMING_MODE);
            return;
        }
        if (cmd == AF_ONFICMD_GET_FEATURES) {
            have_cmd = false;
            memset(feature_param, 0, 4);
            feature_param[0] = uint8_t(mode | iface << 4);
            out = Out::FEATURES;
            out_ptr = 0;
            sel_lun = 0;
            start_op(0, Op::FEATURES, 0, cfg.t_feat_ns);
        } else {
            in_data = true;
            feature_n = 0;
            feature_copy = 0;
        }
        return;
    case AF_ONFICMD_READ_STATUS_ENH:
        if (too_many(3)) return;
        if (n == 3) {
            int lun;
            int64_t b, p;
            int64_t row = addr[0] | addr[1] << 8 | int64_t(addr[2]) << 16;
            have_cmd = false;
            if (!decode_row(row, lun, b, p)) {
                protocol_error("READ STATUS ENHANCED: row address names no LUN");
                return;
            }
            sel_lun = lun;
            status_plane = plane_of_row(row);
            out = Out::STATUS;
        }
        return;
    case AF_ONFICMD_READ_1:
        too_many(5);
        return;
    case AF_ONFICMD_CHANGE_READ_COL_1:
        too_many(2);
        return;
    case AF_ONFICMD_CHANGE_READ_COL_ENH:
        too_many(5);
        return;
    case AF_ONFICMD_ERASE_1:
        too_many(3);
        return;
    case AF_ONFICMD_PROGRAM_1:
    case AF_ONFICMD_CHANGE_WRITE_COL:
        if (in_data && cmd == AF_ONFICMD_PROGRAM_1) return abort_sequence("PAGE PROGRAM: address cycle after data input");
        too_many(5);
        return;
    default:
        abort_sequence("address cycle for a command that takes none");
    }
}

/* The address phase of a PROGRAM/85h sequence ends with the first data
 * cycle or a command: decide what the address cycles meant.  False if the
 * sequence was dropped. */
bool NandModel::finish_addresses() {
    if (!have_cmd || in_data) return true;
    if (cmd != AF_ONFICMD_PROGRAM_1 && cmd != AF_ONFICMD_CHANGE_WRITE_COL) return true;
    size_t na = addr.size();
    if (cmd == AF_ONFICMD_PROGRAM_1 || (cmd == AF_ONFICMD_CHANGE_WRITE_COL && na == 5)) {
        if (na != 5) {
            abort_sequence("PAGE PROGRAM: expected 5 address cycles");
            return false;
        }
        int64_t row = addr[2] | addr[3] << 8 | int64_t(addr[4]) << 16;
        int lun;
        int64_t b, p;
        if (!decode_row(row, lun, b, p)) {
            abort_sequence("PAGE PROGRAM: row address outside the array");
            return false;
        }
        if (luns[lun].op != Op::IDLE) {
            abort_sequence("PAGE PROGRAM / COPYBACK to a busy LUN");
            return false;
        }
        Lun &l = luns[lun];
        int plane = plane_of_row(row);
        if (cmd == AF_ONFICMD_CHANGE_WRITE_COL && prog_seq) {
            /* 85h with a full address inside a program: new row and column, register kept
             * (it moves with the data to the new row's plane). */
            if (lun != sel_lun) {
                abort_sequence("CHANGE WRITE COLUMN with a row address on another LUN");
                return false;
            }
            if (plane != l.cur) l.regs[plane] = l.regs[l.cur];
        } else if (cmd == AF_ONFICMD_CHANGE_WRITE_COL) {
            /* COPYBACK PROGRAM: the register holds the page COPYBACK READ loaded (any target plane). */
            if (!l.copyback_ready) {
                abort_sequence("COPYBACK PROGRAM without a preceding COPYBACK READ on that LUN");
                return false;
            }
            int src = plane_of_row(l.cb_row);
            if (plane != src) l.regs[plane] = l.regs[src];
            data_copyback = true;
        } else {
            /* 80h clears the page registers of the LUN; inside a multi-plane program
             * only the addressed plane's, the queued planes keep their data. */
            bool queued = mp_op == Op::PROGRAM && mp_lun == lun;
            for (int i = 0; i < planes; i++)
                if (!queued || i == plane) std::fill(l.regs[i].begin(), l.regs[i].end(), 0xFF);
            data_copyback = false;
        }
        sel_lun = lun;
        param_source = false;
        l.row = row;
        l.cur = plane;
        std::fill(l.reg_valid.begin(), l.reg_valid.end(), 0);
        prog_seq = true;
    } else if (na != 2) {
        abort_sequence("CHANGE WRITE COLUMN: expected 2 column cycles (or 5 for COPYBACK PROGRAM)");
        return false;
    } else if (!prog_seq) {
        abort_sequence("CHANGE WRITE COLUMN outside a PAGE PROGRAM / COPYBACK PROGRAM sequence");
        return false;
    }
    col = addr[0] | addr[1] << 8;
    in_data = true;
    return true;
}

void NandModel::latch_data(uint8_t d) {
    if (have_cmd && cmd == AF_ONFICMD_SET_FEATURES && in_data) {
        feature_param[feature_n++] = d;
        if (feature_n == 4) {
            have_cmd = in_data = false;
            int want_if = (feature_param[0] >> 4) & 3, want_mode = feature_param[0] & 0x0F;
            if (want_if != AF_ONFIINTERFACE_SDR && want_if != AF_ONFIINTERFACE_NV_DDR2) {
                protocol_error("SET FEATURES: data interface %s not supported", want_if == AF_ONFIINTERFACE_NV_DDR ? "NV-DDR" : "11b");
                return;
            }
            if (want_if == AF_ONFIINTERFACE_SDR && ddr()) {
                protocol_error("SET FEATURES cannot leave NV-DDR2 for SDR: RESET (FFh) in SDR mode 0 does");
                return;
            }
            bool ok = want_if == AF_ONFIINTERFACE_SDR ? want_mode < AF_ONFI_MODES && (cfg.timing_modes >> want_mode & 1)
                                                     : want_mode < AF_ONFI_DDR2_MODES && (cfg.nvddr2_modes >> want_mode & 1);
            if (!ok) {
                protocol_error("SET FEATURES: %s timing mode %d not supported", want_if ? "NV-DDR2" : "SDR", want_mode);
                return;
            }
            pending_iface = want_if;
            sel_lun = 0;
            pending_mode = want_mode;
            tracef("SET_FEATURES %s timing mode %d", want_if ? "NV-DDR2" : "SDR", pending_mode);
            start_op(0, Op::FEATURES, 0, cfg.t_feat_ns);
        }
        return;
    }
    if (have_cmd && (cmd == AF_ONFICMD_PROGRAM_1 || cmd == AF_ONFICMD_CHANGE_WRITE_COL)) {
        if (!finish_addresses()) return;
        Lun &l = luns[sel_lun];
        st.bytes_in++;
        if (col >= page_bytes) {
            if (col == page_bytes) protocol_error("data input past the end of the page");
            col++;
            return;
        }
        l.reg()[col++] = d;
        return;
    }
    protocol_error("data cycle %02Xh outside a data-input sequence", d);
}

/* ------------------------------------------------------ array operations */

void NandModel::start_op(int lun, Op op, int64_t row, int64_t t_op_ns) {
    Lun &l = luns[lun];
    l.op = op;
    l.row = row;
    l.start_ps = now + req_ps(AF_ONFI_TWB);
    l.end_ps = l.start_ps + t_op_ns * 1000;
    l.cut_ps = NEVER;
    t_wb_ref = now;
}

/* ---- Multi-plane operations (ONFI 4.0).  Each plane but the last is
 * confirmed with 11h (program), 32h (read) or D1h (erase): the LUN is busy for
 * tDBSY and the plane waits; the last plane's 10h / 30h / D0h starts one array
 * operation on all of them (one tPROG, tR or tBERS).  The addresses of one
 * operation name one LUN, one page (program, read), distinct planes, and the
 * same block bits above the plane bits (the parameter page claims block
 * address restrictions).  A rule broken is a protocol error; the operation
 * then does nothing: a program or erase ends with FAIL, a read loads no
 * register. */

bool NandModel::mp_rules_hold(Op op, int lun, int64_t row) {
    if (mp_rows.empty()) return true;
    int lun0, lun1;
    int64_t b0, p0, b1, p1;
    decode_row(mp_rows[0], lun0, b0, p0);
    decode_row(row, lun1, b1, p1);
    bool ok = true;
    if (lun != mp_lun) {
        protocol_error("multi-plane %s: a plane on LUN %d, the others on LUN %d", op_name(op), lun, mp_lun);
        ok = false;
    }
    for (int64_t r : mp_rows)
        if (plane_of_row(r) == plane_of_row(row)) {
            protocol_error("multi-plane %s: plane %d addressed twice", op_name(op), plane_of_row(row));
            ok = false;
            break;
        }
    if (op != Op::ERASE && p1 != p0) {
        protocol_error("multi-plane %s: page %" PRId64 " where the first plane has page %" PRId64, op_name(op), p1, p0);
        ok = false;
    }
    if ((b1 >> plane_bits) != (b0 >> plane_bits)) {
        protocol_error("multi-plane %s: block %" PRId64 " and block %" PRId64 " differ above the plane bits", op_name(op),
                       b1, b0);
        ok = false;
    }
    return ok;
}

void NandModel::mp_queue(Op op, int lun, int64_t row) {
    if (planes < 2) return (void)protocol_error("multi-plane %s on a part with one plane per LUN", op_name(op));
    if (mp_op != Op::IDLE && mp_op != op) {
        protocol_error("multi-plane %s started while a multi-plane %s waits for its last plane", op_name(op),
                       op_name(mp_op));
        mp_drop();
    }
    if (mp_op == Op::IDLE) mp_op = op, mp_lun = lun;
    if (!mp_rules_hold(op, lun, row)) mp_bad = true;
    mp_rows.push_back(row);
    int lun2;
    int64_t b, p;
    decode_row(row, lun2, b, p);
    tracef("QUEUE %s lun %d block %" PRId64 " page %" PRId64 " (plane %d)", op_name(op), lun, b, p, plane_of_row(row));
    start_op(lun, Op::DBSY, row, AF_ONFI_MP_T_DBSY_NS);
}

std::vector<int64_t> NandModel::mp_finish(Op op, int lun, int64_t row) {
    if (mp_op == Op::IDLE) return {row};
    if (mp_op != op) {
        protocol_error("single-plane %s while a multi-plane %s waits for its last plane (dropped)", op_name(op),
                       op_name(mp_op));
        mp_drop();
        return {row};
    }
    bool ok = mp_rules_hold(op, lun, row) && !mp_bad;
    std::vector<int64_t> rows = mp_rows;
    rows.push_back(row);
    int first_lun = mp_lun;
    mp_drop();
    if (ok) return rows;
    /* Nothing happens; a program or erase reports FAIL on every LUN it named. */
    for (int i : {first_lun, lun}) {
        Lun &l = luns[i];
        if (op == Op::READ) {
            std::fill(l.reg_valid.begin(), l.reg_valid.end(), 0);
        } else {
            l.status_fail = 1;
            std::fill(l.plane_fail.begin(), l.plane_fail.end(), 1);
        }
    }
    tracef("DROP multi-plane %s (address rules)", op_name(op));
    return {};
}

void NandModel::do_read(Lun &l, bool copyback) {
    std::fill(l.reg_valid.begin(), l.reg_valid.end(), 0);
    for (auto &t : l.targets) {
        int lun;
        int64_t b, p;
        decode_row(t.row, lun, b, p);
        int64_t pidx = block_index(lun, b) * cfg.pages_per_block + p;
        std::vector<uint8_t> &reg = l.regs[t.plane];
        if (ptab[pidx].flags & AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK)
            memcpy(reg.data(), page_data(pidx), page_bytes);
        else
            std::fill(reg.begin(), reg.end(), 0xFF);
        double rate = ber + cfg.bit_error_growth * btab[block_index(lun, b)].erase_count;
        uint8_t *r = reg.data();
        st.bit_errors += rng.sample(uint64_t(page_bytes) * 8, rate, [&](uint64_t bit) { r[bit >> 3] ^= uint8_t(1u << (bit & 7)); });
        st.reads++;
        l.reg_valid[t.plane] = 1;
    }
    l.copyback_ready = copyback;
    if (copyback) l.cb_row = l.targets[0].row;
}

void NandModel::do_program_start(int lun, const std::vector<int64_t> &rows, bool copyback) {
    Lun &l = luns[lun];
    /* The page register holds the whole page as it will be programmed, however the
     * host assembled it (one data input, CHANGE WRITE COLUMN chunks, COPYBACK READ
     * plus patches); the channel puts BCH parity after the spare user bytes, so the
     * OOB record's kind is at a fixed raw column (nandsim.oob_kind_column). */
    int64_t kind_col = cfg.page_data + AF_NANDMODEL_OOB_KIND_SPARE_OFF;
    bool wp = !(pins & NAND_PIN_WP_N);
    bool cut = false;
    std::fill(l.plane_fail.begin(), l.plane_fail.end(), 0);
    l.targets.clear();
    for (int64_t row : rows) {
        int lun2;
        int64_t b, p;
        decode_row(row, lun2, b, p);
        int plane = plane_of_row(row);
        int64_t bidx = block_index(lun, b), pidx = bidx * cfg.pages_per_block + p;
        uint8_t kind = kind_col < page_bytes ? l.regs[plane][kind_col] : 0xFF;
        n_prog++;
        st.programs++;
        st.programs_kind[kind]++;
        tracef("%s lun %d block %" PRId64 " page %" PRId64 "%s", copyback ? "COPYBACK_PROGRAM" : "PROGRAM", lun, b, p,
               rows.size() > 1 ? " multi-plane" : "");
        if (wp) {
            /* Write protected: nothing happens, FAIL at once. */
            l.plane_fail[plane] = 1;
            st.program_fails++;
            msg("info", "PROGRAM lun %d block %" PRId64 " page %" PRId64 " refused: WP# low", lun, b, p);
            continue;
        }
        bool fail = false;
        const char *why = nullptr;
        if (btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK) fail = true, why = "factory-bad block";
        if (cfg.endurance && btab[bidx].erase_count > cfg.endurance) fail = true, why = "block worn out (endurance)";
        auto hit = std::find(fail_prog_rows.begin(), fail_prog_rows.end(), pidx);
        if (hit != fail_prog_rows.end()) fail_prog_rows.erase(hit), fail = true, why = "injected failure";
        auto nth = std::find(fail_prog_nth.begin(), fail_prog_nth.end(), n_prog);
        if (nth != fail_prog_nth.end()) fail_prog_nth.erase(nth), fail = true, why = "injected failure (n-th program)";
        auto any = std::find(fail_prog_rows.begin(), fail_prog_rows.end(), int64_t(-1));
        if (!fail && any != fail_prog_rows.end()) fail_prog_rows.erase(any), fail = true, why = "injected failure (next program)";
        if (why) msg("info", "PROGRAM lun %d block %" PRId64 " page %" PRId64 " will FAIL: %s", lun, b, p, why);
        if (!fail && !(btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK)) {
            if (ptab[pidx].programs >= cfg.nop) {
                st.nop_violations++;
                media_violation("page lun %d block %" PRId64 " page %" PRId64 " programmed %d times since erase (NOP %" PRId64 ")",
                                lun, b, p, ptab[pidx].programs + 1, cfg.nop);
            }
            if (cfg.sequential_pages && p + 1 < btab[bidx].next_page) {
                st.order_violations++;
                media_violation("page order: lun %d block %" PRId64 " page %" PRId64 " programmed after page %d", lun, b, p,
                                btab[bidx].next_page - 1);
            }
        }
        if (!(btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK)) ptab[pidx].flags |= AF_NANDIMG_PAGE_FLAGS_IN_PROGRESS_MASK;
        l.targets.push_back({row, plane, fail, kind});
        if (cut_prog_k && n_prog == cut_prog_k) cut = true, cut_prog_k = 0;
        if (cut_kind_k && kind == cut_kind && ++n_prog_kind == cut_kind_k) {
            cut = true;
            cut_kind_k = 0;
            msg("info", "PROGRAM lun %d block %" PRId64 " page %" PRId64 ": OOB kind %s, power will be cut at %.0f%%",
                lun, b, p, af_kind_name(kind), cut_progress * 100);
        }
    }
    if (wp) {
        l.status_fail = 1;
        l.row = rows.back();
        return;
    }
    if (rows.size() > 1) st.multi_plane_ops++;
    /* One array operation for every plane: one tPROG. */
    start_op(lun, Op::PROGRAM, rows.back(), cfg.t_prog_ns);
    if (cut) {
        l.cut_ps = l.start_ps + int64_t(cut_progress * double(l.end_ps - l.start_ps));
        l.cut_progress = cut_progress;
    }
}

void NandModel::do_erase_start(int lun, const std::vector<int64_t> &rows) {
    Lun &l = luns[lun];
    bool wp = !(pins & NAND_PIN_WP_N);
    bool cut = false;
    std::fill(l.plane_fail.begin(), l.plane_fail.end(), 0);
    l.targets.clear();
    for (int64_t row : rows) {
        int lun2;
        int64_t b, p;
        decode_row(row, lun2, b, p);
        int plane = plane_of_row(row);
        int64_t bidx = block_index(lun, b);
        n_erase++;
        st.erases++;
        tracef("ERASE lun %d block %" PRId64 "%s", lun, b, rows.size() > 1 ? " multi-plane" : "");
        if (wp) {
            l.plane_fail[plane] = 1;
            st.erase_fails++;
            msg("info", "ERASE lun %d block %" PRId64 " refused: WP# low", lun, b);
            continue;
        }
        bool fail = false;
        const char *why = nullptr;
        if (btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK) fail = true, why = "factory-bad block";
        if (cfg.endurance && btab[bidx].erase_count >= cfg.endurance) fail = true, why = "block worn out (endurance)";
        auto hit = std::find(fail_erase_blocks.begin(), fail_erase_blocks.end(), bidx);
        if (hit != fail_erase_blocks.end()) fail_erase_blocks.erase(hit), fail = true, why = "injected failure";
        auto nth = std::find(fail_erase_nth.begin(), fail_erase_nth.end(), n_erase);
        if (nth != fail_erase_nth.end()) fail_erase_nth.erase(nth), fail = true, why = "injected failure (n-th erase)";
        auto any = std::find(fail_erase_blocks.begin(), fail_erase_blocks.end(), int64_t(-1));
        if (!fail && any != fail_erase_blocks.end()) fail_erase_blocks.erase(any), fail = true, why = "injected failure (next erase)";
        if (why) msg("info", "ERASE lun %d block %" PRId64 " will FAIL: %s", lun, b, why);
        if (!(btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK)) btab[bidx].erase_count++;
        l.targets.push_back({row & ~((int64_t(1) << page_bits) - 1), plane, fail, 0xFF});
        if (cut_erase_k && n_erase == cut_erase_k) cut = true, cut_erase_k = 0;
    }
    if (wp) {
        l.status_fail = 1;
        return;
    }
    if (rows.size() > 1) st.multi_plane_ops++;
    start_op(lun, Op::ERASE, rows.back() & ~((int64_t(1) << page_bits) - 1), cfg.t_bers_ns);
    if (cut) {
        l.cut_ps = l.start_ps + int64_t(cut_progress * double(l.end_ps - l.start_ps));
        l.cut_progress = cut_progress;
    }
}

/* A program that stopped at `progress` (0..1): each bit it was to clear is
 * cleared with that probability; a few marginal cells flip either way. */
void NandModel::tear_page(int64_t pidx, const uint8_t *newdata, double progress, bool mark_torn) {
    uint8_t *d = page_data(pidx);
    bool was = ptab[pidx].flags & AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK;
    if (!was) memset(d, 0xFF, page_bytes);
    for (int64_t i = 0; i < page_bytes; i++) {
        uint8_t clear = d[i] & ~newdata[i];  /* bits the program was to clear */
        if (!clear) continue;
        uint8_t done = 0;
        for (int bit = 0; bit < 8; bit++)
            if ((clear >> bit & 1) && rng.uniform() < progress) done |= uint8_t(1u << bit);
        d[i] &= ~done;
    }
    rng.sample(uint64_t(page_bytes) * 8, 2e-3, [&](uint64_t bit) { d[bit >> 3] ^= uint8_t(1u << (bit & 7)); });
    ptab[pidx].flags |= AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK;
    if (mark_torn) ptab[pidx].flags |= AF_NANDIMG_PAGE_FLAGS_TORN_MASK;
}

void NandModel::apply_program(Lun &l, double progress) {
    for (auto &t : l.targets) {
        int lun;
        int64_t b, p;
        decode_row(t.row, lun, b, p);
        int64_t bidx = block_index(lun, b), pidx = bidx * cfg.pages_per_block + p;
        if (btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK) continue;
        const std::vector<uint8_t> &reg = l.regs[t.plane];
        af_nandimg_page_t &pt = ptab[pidx];
        hdr->program_seq++;
        pt.seq = uint32_t(hdr->program_seq);
        pt.programs = uint8_t(std::min(255, pt.programs + 1));
        btab[bidx].next_page = uint16_t(std::max<int64_t>(btab[bidx].next_page, p + 1));
        if (progress >= 1.0 && !t.fail) {
            uint8_t *d = page_data(pidx);
            if (pt.flags & AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK)
                for (int64_t i = 0; i < page_bytes; i++) d[i] &= reg[i];
            else
                memcpy(d, reg.data(), page_bytes);
            pt.flags |= AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK;
        } else {
            tear_page(pidx, reg.data(), t.fail ? 0.5 : progress, !t.fail);
            if (t.fail) pt.flags |= AF_NANDIMG_PAGE_FLAGS_PROGRAM_FAILED_MASK;
            if (!t.fail && cfg.mlc_paired) {
                int64_t lower = paired_lower(p);
                if (lower >= 0) {
                    int64_t lidx = bidx * cfg.pages_per_block + lower;
                    if (ptab[lidx].flags & AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK) {
                        uint8_t *d = page_data(lidx);
                        uint64_t n = rng.sample(uint64_t(page_bytes) * 8, 0.02, [&](uint64_t bit) { d[bit >> 3] ^= uint8_t(1u << (bit & 7)); });
                        ptab[lidx].flags |= AF_NANDIMG_PAGE_FLAGS_PAIRED_DAMAGE_MASK;
                        msg("info", "MLC: cut in upper page %" PRId64 " damaged paired lower page %" PRId64 " of block %" PRId64
                            " (%" PRIu64 " bits)", p, lower, b, n);
                    }
                }
            }
        }
        pt.flags &= ~AF_NANDIMG_PAGE_FLAGS_IN_PROGRESS_MASK;
    }
}

void NandModel::apply_erase(Lun &l, double progress) {
    for (auto &t : l.targets) {
        int lun;
        int64_t b, p;
        decode_row(t.row, lun, b, p);
        int64_t bidx = block_index(lun, b);
        if (btab[bidx].flags & AF_NANDIMG_BLOCK_FLAGS_FACTORY_BAD_MASK) continue;
        int64_t first = bidx * cfg.pages_per_block;
        if (progress >= 1.0 && !t.fail) {
            for (int64_t i = 0; i < cfg.pages_per_block; i++) ptab[first + i] = af_nandimg_page_t{};
            btab[bidx].next_page = 0;
            btab[bidx].flags &= ~(AF_NANDIMG_BLOCK_FLAGS_ERASE_INTERRUPTED_MASK | AF_NANDIMG_BLOCK_FLAGS_ERASE_FAILED_MASK);
            /* Give the block's bytes back to the file system: keeps the image sparse. */
            off_t start = off_t(hdr->data_off + first * page_bytes), len = off_t(cfg.pages_per_block * page_bytes);
            off_t a = (start + 4095) & ~off_t(4095), e = (start + len) & ~off_t(4095);
            if (e > a) fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, a, e - a);
            continue;
        }
        double pr = t.fail ? 0.5 : progress;
        for (int64_t i = 0; i < cfg.pages_per_block; i++) {
            af_nandimg_page_t &pt = ptab[first + i];
            if (!(pt.flags & AF_NANDIMG_PAGE_FLAGS_PROGRAMMED_MASK)) continue;
            uint8_t *d = page_data(first + i);
            rng.sample(uint64_t(page_bytes) * 8, pr, [&](uint64_t bit) { d[bit >> 3] |= uint8_t(1u << (bit & 7)); });
            pt.flags |= AF_NANDIMG_PAGE_FLAGS_ERASE_DISTURBED_MASK;
        }
        btab[bidx].flags |= t.fail ? AF_NANDIMG_BLOCK_FLAGS_ERASE_FAILED_MASK : AF_NANDIMG_BLOCK_FLAGS_ERASE_INTERRUPTED_MASK;
    }
}

void NandModel::complete_op(Lun &l) {
    Op op = l.op;
    now = std::max(now, l.end_ps);
    l.busy_ps += l.end_ps - l.start_ps;
    l.op = Op::IDLE;
    switch (op) {
    case Op::READ:
    case Op::COPYBACK_READ:
        do_read(l, op == Op::COPYBACK_READ);
        break;
    case Op::PROGRAM:
    case Op::ERASE:
        if (op == Op::PROGRAM) apply_program(l, 1.0);
        else apply_erase(l, 1.0);
        l.status_fail = 0;
        for (auto &t : l.targets) {
            l.plane_fail[t.plane] = t.fail;
            l.status_fail |= t.fail;
            if (t.fail) (op == Op::PROGRAM ? st.program_fails : st.erase_fails)++;
        }
        if (op == Op::PROGRAM) {
            std::fill(l.reg_valid.begin(), l.reg_valid.end(), 0);
            l.copyback_ready = false;
        }
        break;
    case Op::FEATURES:
        if (pending_mode >= 0) {
            mode = pending_mode;
            iface = pending_iface;
            if (ddr()) t_itc_ref = l.end_ps;   /* the new interface's first cycle waits tITC */
        }
        pending_mode = pending_iface = -1;
        break;
    case Op::RESET:
        for (auto &x : luns) {
            x.status_fail = 0;
            std::fill(x.plane_fail.begin(), x.plane_fail.end(), 0);
        }
        break;
    default:
        break;
    }
    if (!any_busy()) t_ready = l.end_ps;
}

void NandModel::power_cut(const char *why) {
    if (!powered) return;
    msg("POWER CUT", "%s", why);
    printf("nand%d: POWER CUT at %.3f ns: %s\n", index, now / 1000.0, why);
    for (size_t i = 0; i < luns.size(); i++) {
        Lun &l = luns[i];
        if (l.op == Op::PROGRAM || l.op == Op::ERASE) {
            double progress = l.cut_ps != NEVER && now >= l.cut_ps ? l.cut_progress
                              : l.end_ps > l.start_ps ? double(std::max<int64_t>(0, now - l.start_ps)) / (l.end_ps - l.start_ps) : 0;
            progress = std::min(progress, 0.999);
            /* Every plane of the operation stops at the same point. */
            for (auto &t : l.targets) {
                int lun;
                int64_t b, p;
                decode_row(t.row, lun, b, p);
                printf("nand%d: POWER CUT interrupts %s of LUN %zu block %" PRId64 " page %" PRId64 " at %.0f%%", index,
                       op_name(l.op), i, b, p, progress * 100);
                if (l.op == Op::PROGRAM) printf(" (OOB kind %s)", af_kind_name(t.kind));
                printf("\n");
                t.fail = false;
            }
            if (l.op == Op::PROGRAM) apply_program(l, progress);
            else apply_erase(l, progress);
            l.busy_ps += std::max<int64_t>(0, now - l.start_ps);
        }
        l.op = Op::IDLE;
    }
    hdr->power_cuts++;
    powered = false;
    power_lost = true;
    drive = false;
    msync(map, map_size, MS_SYNC);
    write_stats();
    /* One $finish per process: Verilator exits at once on a second one, before the
     * other models of the same clock edge (a cut on every target at one instant) cut. */
    static bool finish_asked = false;
    if (cfg.power_cut_finish && !finish_asked) finish_req = finish_asked = true;
}

void NandModel::run_until(int64_t t) {
    /* Process internal events up to time t in order. */
    for (;;) {
        int64_t best = NEVER;
        Lun *bl = nullptr;
        bool cut = false;
        for (auto &l : luns) {
            if (l.op == Op::IDLE) continue;
            if (l.cut_ps != NEVER && l.cut_ps < best) best = l.cut_ps, bl = &l, cut = true;
            if (l.end_ps < best) best = l.end_ps, bl = &l, cut = false;
        }
        if (cut_at_ps < best) best = cut_at_ps, bl = nullptr, cut = true;
        if (best > t || best == NEVER) break;
        now = best;
        if (cut) {
            cut_at_ps = NEVER;
            power_cut(bl ? "scheduled cut inside an array operation" : "scheduled cut at this time");
            return;
        }
        complete_op(*bl);
    }
    now = t;
}

int64_t NandModel::next_deadline() {
    int64_t d = NEVER;
    if (!powered) return d;
    for (auto &l : luns) {
        if (l.op == Op::IDLE) continue;
        if (l.start_ps > now) d = std::min(d, l.start_ps);
        d = std::min(d, l.end_ps);
        if (l.cut_ps != NEVER) d = std::min(d, l.cut_ps);
    }
    if (cut_at_ps != NEVER) d = std::min(d, cut_at_ps);
    if (drive && out_valid_ps > now) d = std::min(d, out_valid_ps);
    if (!dqs_q.empty()) d = std::min(d, std::max(now + 1, dqs_q.front().t));
    if (drive && hold_valid && t_re_fall + trloh_ps() > now) d = std::min(d, t_re_fall + trloh_ps());
    return d;
}

uint32_t NandModel::outputs() {
    uint32_t o = 0;
    bool ready = true;
    for (auto &l : luns) if (lun_busy(l)) ready = false;
    if (powered && ready) o |= NAND_OUT_RB_N;
    if (powered && drive && !(pins & NAND_PIN_CE_N)) {
        o |= NAND_OUT_DQ_OE;
        /* Before tREA/tCEA the bus carries a wrong byte, never the right one,
         * except that EDO holds the previous byte for tRLOH after the fall. */
        uint8_t b = now >= out_valid_ps ? out_byte : uint8_t(out_byte ^ 0xA5);
        if (out == Out::STATUS && now >= out_valid_ps) b = status_of(sel_lun);
        if (now < out_valid_ps && hold_valid && now < t_re_fall + trloh_ps()) b = hold_byte;
        o |= b;
    }
    if (powered && dqs_out && !(pins & NAND_PIN_CE_N)) {
        o |= NAND_OUT_DQ_OE | NAND_OUT_DQS_OE | (dqs_level ? NAND_OUT_DQS : 0);
        o |= ddr_valid ? ddr_byte : uint8_t(ddr_byte ^ 0xA5);
    }
    if (power_lost) o |= NAND_OUT_POWER_LOST;
    if (strict_fatal) o |= NAND_OUT_FATAL;
    if (finish_req) o |= NAND_OUT_FINISH;
    return o;
}

int64_t NandModel::eval(int64_t cycle, uint32_t new_pins, int *outs) {
    int64_t t = (cycle - cycle0) * period_ps;
    if (powered) run_until(t);
    now = t;
    while (powered && !dqs_q.empty() && dqs_q.front().t <= now) {
        DqsEvent e = dqs_q.front();
        dqs_q.pop_front();
        dqs_out = true;
        if (e.level < 0) {
            dqs_level = false;
        } else {
            dqs_level = e.level;
            ddr_byte = e.byte;
            ddr_valid = true;
        }
    }
    if (powered) {
        uint32_t old = pins;
        if (first_eval) {
            old = new_pins;
            first_eval = false;
            if (!(new_pins & NAND_PIN_CE_N)) t_ce_fall = LONG_AGO;
        }
        uint32_t chg = old ^ new_pins;
        bool ce_low_old = !(old & NAND_PIN_CE_N), ce_low_new = !(new_pins & NAND_PIN_CE_N);
        /* Strobe edges first, judged against the previous sample of everything else. */
        if ((chg & NAND_PIN_CE_N) && ce_low_new) on_ce_fall();
        bool sel = ce_low_old || ce_low_new;
        pins = (pins & ~NAND_PIN_WP_N) | (new_pins & NAND_PIN_WP_N);
        if (sel && (chg & NAND_PIN_WE_N)) {
            if (!(new_pins & NAND_PIN_WE_N)) on_we_fall();
            else if (ce_low_old) on_we_rise(old);
        }
        if (sel && (chg & NAND_PIN_RE_N) && ce_low_new) {
            if (!(new_pins & NAND_PIN_RE_N)) on_re_fall();
            else on_re_rise();
        }
        if (!(new_pins & NAND_PIN_WE_N) && !(new_pins & NAND_PIN_RE_N) && ce_low_new && (chg & (NAND_PIN_WE_N | NAND_PIN_RE_N)))
            protocol_error("WE# and RE# both low");
        /* Then the levels that were latched: hold times. */
        bool latched = last_latch != Latch::NONE;
        if (chg & NAND_PIN_CLE) {
            if (latched && last_latch == Latch::CMD && !cle_since_latch && !(new_pins & NAND_PIN_CLE))
                check_min(AF_ONFI_TCLH, now - t_we_rise);
            cle_since_latch = true;
            t_cle_chg = now;
            if (!(new_pins & NAND_PIN_CLE)) t_cle_fall = now;
        }
        if (chg & NAND_PIN_ALE) {
            if (latched && last_latch == Latch::ADDR && !ale_since_latch && !(new_pins & NAND_PIN_ALE))
                check_min(AF_ONFI_TALH, now - t_we_rise);
            ale_since_latch = true;
            t_ale_chg = now;
            if (!(new_pins & NAND_PIN_ALE)) t_ale_fall = now;
        }
        bool dqs_drv_old = old & NAND_PIN_DQS_DRV, dqs_drv_new = new_pins & NAND_PIN_DQS_DRV;
        if (sel && dqs_drv_old && dqs_drv_new && (chg & NAND_PIN_DQS)) on_dqs_edge(new_pins & NAND_PIN_DQS, old);
        if (dqs_drv_new && !dqs_drv_old && !(new_pins & NAND_PIN_DQS)) t_dqs_low = now;
        if (dqs_drv_old && !dqs_drv_new) on_dqs_release();
        if (chg & (0xFFu << NAND_PIN_DQ_SHIFT)) {
            if (ddr() && dqs_edges && !dq_since_dqs) check_min(T_DDR2 + AF_ONFI_DDR2_TDH, now - t_dqs_edge);
            dq_since_dqs = true;
            if (latched && !dq_since_latch && (new_pins & NAND_PIN_WE_N) && !(ddr() && last_latch == Latch::DATA))
                check_min(AF_ONFI_TDH, now - t_we_rise);
            dq_since_latch = true;
            t_dq_chg = now;
        }
        if ((chg & NAND_PIN_CE_N) && !ce_low_new) on_ce_rise();
        pins = new_pins;
    }
    *outs = int(outputs());
    int64_t d = next_deadline();
    if (d == NEVER) return NAND_NO_DEADLINE;
    return cycle0 + (d + period_ps - 1) / period_ps;
}

int64_t NandModel::control(int64_t cycle, int op, int64_t a0, int64_t a1, int64_t a2) {
    now = (cycle - cycle0) * period_ps;
    switch (op) {
    case AF_NANDCTL_NOP:
        return 0;
    case AF_NANDCTL_RELOAD:
        shutdown();
        power_on(cycle);
        return config_ok ? 0 : -1;
    case AF_NANDCTL_POWER_CUT:
        if (powered) run_until(now);
        power_cut("cut by the control port");
        return 0;
    case AF_NANDCTL_SCHEDULE_CUT: {
        double pr = a2 > 0 ? a2 / 1000.0 : cfg.power_cut_progress;
        if (a0 == AF_NANDCUTWHEN_AT_TIME) cut_at_ps = a1 * 1000;
        else if (a0 == AF_NANDCUTWHEN_PROGRAM) cut_prog_k = n_prog + a1, cut_progress = pr;
        else if (a0 == AF_NANDCUTWHEN_ERASE) cut_erase_k = n_erase + a1, cut_progress = pr;
        else if (a0 == AF_NANDCUTWHEN_PROGRAM_KIND) {
            int64_t k = a1 & 0xFFFFFFFF, kind = (a1 >> 32) & 0xFF;
            if (k < 1 || !kind) return -1;
            cut_kind = kind, n_prog_kind = 0, cut_kind_k = k, cut_progress = pr;
        }
        else return -1;
        return 0;
    }
    case AF_NANDCTL_FAIL_PROGRAM:
        fail_prog_rows.push_back(a0);
        return 0;
    case AF_NANDCTL_FAIL_ERASE:
        fail_erase_blocks.push_back(a0);
        return 0;
    case AF_NANDCTL_BIT_ERROR_RATE:
        ber = a0 / 1e12;
        return 0;
    case AF_NANDCTL_STAT:
        switch (a0) {
        case AF_NANDSTAT_READS: return st.reads;
        case AF_NANDSTAT_PROGRAMS: return st.programs;
        case AF_NANDSTAT_ERASES: return st.erases;
        case AF_NANDSTAT_BYTES_IN: return st.bytes_in;
        case AF_NANDSTAT_BYTES_OUT: return st.bytes_out;
        case AF_NANDSTAT_TIMING_VIOLATIONS: return st.timing_total;
        case AF_NANDSTAT_PROTOCOL_ERRORS: return st.protocol_errors;
        case AF_NANDSTAT_MEDIA_VIOLATIONS: return st.media_violations;
        case AF_NANDSTAT_BIT_ERRORS: return st.bit_errors;
        case AF_NANDSTAT_PROGRAM_FAILS: return st.program_fails;
        case AF_NANDSTAT_ERASE_FAILS: return st.erase_fails;
        case AF_NANDSTAT_POWER_CUTS: return power_lost ? 1 : 0;
        case AF_NANDSTAT_BUSY_NS: return a1 >= 0 && a1 < (int64_t)luns.size() ? luns[a1].busy_ps / 1000 : -1;
        case AF_NANDSTAT_COMMANDS: return st.commands;
        case AF_NANDSTAT_NOW_NS: return now / 1000;
        case AF_NANDSTAT_PROGRAMS_KIND: return a1 >= 0 && a1 < 256 ? int64_t(st.programs_kind[a1]) : -1;
        }
        return -1;
    case AF_NANDCTL_DUMP_STATS:
        write_stats();
        return 0;
    case AF_NANDCTL_CLEAR_STATS:
        st = Stats();
        for (auto &l : luns) l.busy_ps = 0;
        return 0;
    case AF_NANDCTL_TIMING_MODE:
        if (a0 < 0 || a0 >= AF_ONFI_MODES) return -1;
        mode = int(a0);
        return 0;
    case AF_NANDCTL_STRICT:
        cfg.strict = a0 != 0;
        return 0;
    }
    (void)a2;
    return -1;
}

}  // namespace

/* ---------------------------------------------------------------- DPI-C */

extern "C" void *nand_model_open(int index, const char *config_path, const char *overrides) {
    auto *m = new NandModel(index, config_path ? config_path : "", overrides ? overrides : "");
    m->power_on(0);
    return m;
}

extern "C" int64_t nand_model_eval(void *handle, int64_t cycle, int pins, int *outs) {
    return static_cast<NandModel *>(handle)->eval(cycle, uint32_t(pins), outs);
}

extern "C" int64_t nand_model_control(void *handle, int64_t cycle, int op, int64_t arg0, int64_t arg1, int64_t arg2) {
    return static_cast<NandModel *>(handle)->control(cycle, op, arg0, arg1, arg2);
}

extern "C" void nand_model_close(void *handle) { delete static_cast<NandModel *>(handle); }
