/* pcie2tcp: the simulated SoC's PCIe link on a TCP socket; the root complex is the client.
 *
 * A litex_sim module on the pads of soc/pcie_sim_phy.py (the device end of the link: TLP streams
 * of 64-bit beats, and the configuration bits a root complex would program), serving one TCP
 * client at a time -- atomflash.pcie_link.SimPcieLink, the root complex in the host's process.
 *
 * Framing.  Both ways the socket carries messages: a little-endian u32 byte count, then records.
 * A record is u8 kind, u8 zero, u16 count of dwords, then:
 *   TLP (1), client -> module:   the TLP's dwords (header, then payload);
 *   TLP (1), module -> client:   u64 cycle the TLP left the device, u64 cycle it reaches the host,
 *                                then the TLP's dwords;
 *   CONFIG (2), client -> module: (key, value) pairs, applied at once; answered by
 *   STATUS (3), module -> client: u64 current cycle, then (key, value) pairs (KEY_* below).
 * The dword count leaves out the module's u64 stamps.
 * Every dword is little endian: a header dword is its numeric value, payload bytes are in address
 * order.  A TLP is one record, header and payload together; the device's TLPs are gathered into
 * one message until the device has sent nothing for FLUSH_IDLE_CYCLES (or a read of host memory
 * waits for its answer, or the buffer is large): a 4 KiB DMA is one or two messages.  A STATUS
 * answer goes out at once, after every TLP the device sent before the CONFIG was taken.
 *
 * Link model (args "gen", "lanes", "latency_ns"; default gen 2 x1, 250 ns).  Each direction is a
 * wire of lanes x the generation's data rate after line coding (gen1 2.5 GT/s and gen2 5 GT/s at
 * 8b/10b, gen3 8 GT/s at 128b/130b).  A TLP occupies it for its bytes plus FRAMING_BYTES (start
 * of packet, sequence number, LCRC); DLLPs (acks, flow-control updates) and replays are not
 * modelled.  A TLP starts on the wire when it is handed over and the wire is free, and arrives a
 * fixed latency after its last byte left.  Device to host: a TLP is handed over when its last
 * beat leaves the PHY; the PHY's stream is held (tx_ready low) while a handed-over TLP waits for
 * the wire, so the device has one TLP in flight and one queued, as a hard block's buffer would.
 * Host to device: a TLP is handed over when the client's message arrives -- or, for a completion,
 * at the moment the device's read request reached the host: the host answers in no simulated
 * time.  For that the simulation waits: when a device read request reaches the host (in
 * simulated time) and its last completion has not come over the socket yet, tick() blocks on the
 * socket until it has.  Simulated time therefore depends on the client's speed only for what the
 * client starts itself (BAR0 accesses), never for DMA.  The beats of a TLP then enter the PHY one
 * a cycle while it takes them.  The PHY's 64-bit datapath carries 8 bytes a cycle (800 MB/s at
 * 100 MHz); a link faster than that is limited by the datapath, not by this model.
 *
 * LitePCIe's 64-bit header extracter takes a 3-dword-header TLP's payload as pairs (the previous
 * beat's upper dword, this beat's lower) and ends with the beat marked last, so a TLP whose
 * dwords exactly fill its last beat would lose its final payload dword: such a TLP gets one more
 * (empty) beat.
 *
 * Configuration space is not simulated (see soc/pcie_sim_phy.py): the client sets link up, bus
 * master enable, MSI-X enable and function mask, max payload and max read request sizes with
 * CONFIG; args of the same names set their values at start.  With no client connected the
 * device's TLPs are dropped, as on a link nobody answers.
 *
 * Built by soc/sim.py into the gateware's modules/ beside LiteX's.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <json-c/json.h>

#include "error.h"
#include "modules.h"
#include "sim_module.h"

#define REC_TLP 1
#define REC_CONFIG 2
#define REC_STATUS 3

enum {
	KEY_LINK_UP = 1, KEY_BUS_MASTER, KEY_MSIX_ENABLE, KEY_MSIX_MASK, KEY_MAX_PAYLOAD, KEY_MAX_READ_REQUEST,
	KEY_CYCLE_LO = 16, KEY_CYCLE_HI, KEY_CLK_PERIOD_PS, KEY_MILLIPS_PER_BYTE, KEY_LATENCY_PS, KEY_FRAMING_BYTES,
	KEY_TLPS_TO_HOST, KEY_TLPS_FROM_HOST, KEY_MESSAGES_TO_HOST, KEY_MESSAGES_FROM_HOST, KEY_DATA_WIDTH,
	KEY_GEN, KEY_LANES, KEY_LAST_COMPLETION_CYCLE_LO, KEY_LAST_COMPLETION_CYCLE_HI,
};

#define FRAMING_BYTES 8		/* STP + sequence number + LCRC (+ END at gen1/2) */
#define FLUSH_IDLE_CYCLES 256	/* the device quiet this long: send what it said */
#define FLUSH_BYTES (64 * 1024)
#define MAX_TLP_DW (4 + 1024 + 2)
#define MAX_PENDING 256

struct rx_tlp {
	struct rx_tlp *next;
	uint64_t deliver_ps;	/* its first beat may enter the PHY */
	int ndw, beats, beat, completion;
	uint32_t dw[];
};

struct pending_read {
	int tag;
	uint64_t at_host_ps;
};

struct session_s {
	/* pads */
	char *tx_valid, *tx_ready, *tx_last, *rx_valid, *rx_ready, *rx_last;
	uint64_t *tx_data, *rx_data;
	char *link_up, *bus_master, *msix_enable, *msix_mask;
	uint16_t *max_payload, *max_read_request;
	char *sys_clk;
	clk_edge_state_t edge;

	/* configuration */
	int cfg_link_up, cfg_bus_master, cfg_msix_enable, cfg_msix_mask, cfg_mps, cfg_mrrs;
	int gen, lanes;
	double ps_per_byte;
	uint64_t latency_ps;

	/* time */
	uint64_t cycle, now_ps, last_edge_ps, period_ps;

	/* client */
	struct event *ev;
	int fd;
	uint8_t *in;		/* bytes received, not yet parsed */
	size_t in_len, in_cap;
	uint8_t *out;		/* message being gathered: 4-byte length, then records */
	size_t out_len, out_cap;
	uint64_t out_idle;

	/* device -> host */
	uint32_t gather[MAX_TLP_DW];
	int gather_ndw, gather_overflow;
	uint64_t tx_wire_free_ps, tx_hold_until_ps;
	struct pending_read pending[MAX_PENDING];
	int npending;

	/* host -> device */
	struct rx_tlp *rx_head, *rx_tail;
	uint64_t rx_wire_free_ps;

	/* counters */
	uint64_t tlps_to_host, tlps_from_host, messages_to_host, messages_from_host;
	uint64_t last_completion_cycle; /* the last beat of the latest completion entered the PHY */
	int warned_short;
};

static struct event_base *base;

/* -- small helpers ------------------------------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | (p[1] << 8) | (p[2] << 16) | ((uint32_t)p[3] << 24);
}

static int arg_int(json_object *js, const char *key, int dflt)
{
	json_object *obj;
	if (js && json_object_object_get_ex(js, key, &obj))
		return atoi(json_object_get_string(obj));
	return dflt;
}

/* dwords a TLP has by its header; 0 if the header is not one this link carries */
static int tlp_dwords(uint32_t dw0)
{
	int fmt = (dw0 >> 29) & 7, len = dw0 & 0x3ff;
	if (fmt > 3)
		return 0;
	return ((fmt & 1) ? 4 : 3) + ((fmt & 2) ? (len ? len : 1024) : 0);
}

static int is_memory_read(uint32_t dw0)
{
	return ((dw0 >> 29) & 7) <= 1 && ((dw0 >> 24) & 0x1f) == 0;
}

static int is_completion(uint32_t dw0)
{
	return ((dw0 >> 24) & 0x1f) == 0x0a;
}

static uint64_t cycles_until(struct session_s *s, uint64_t t_ps)
{
	if (t_ps <= s->now_ps || !s->period_ps)
		return s->cycle;
	return s->cycle + (t_ps - s->now_ps + s->period_ps - 1) / s->period_ps;
}

static uint64_t wire_ps(struct session_s *s, int ndw)
{
	return (uint64_t)llround((4.0 * ndw + FRAMING_BYTES) * s->ps_per_byte);
}

/* -- the outgoing message ----------------------------------------------------------------------- */

static void out_reserve(struct session_s *s, size_t more)
{
	if (s->out_len + more <= s->out_cap)
		return;
	while (s->out_len + more > s->out_cap)
		s->out_cap = s->out_cap ? 2 * s->out_cap : 65536;
	s->out = realloc(s->out, s->out_cap);
	if (!s->out) {
		eprintf("pcie2tcp: out of memory\n");
		exit(1);
	}
}

static void out_begin_record(struct session_s *s, int kind, int ndw)
{
	out_reserve(s, 4 + 4 + 16 + 4 * (size_t)ndw);
	if (s->out_len == 0)
		s->out_len = 4; /* the message's length, filled in by flush */
	s->out[s->out_len] = kind;
	s->out[s->out_len + 1] = 0;
	s->out[s->out_len + 2] = ndw & 0xff;
	s->out[s->out_len + 3] = ndw >> 8;
	s->out_len += 4;
}

static void out_u64(struct session_s *s, uint64_t v)
{
	put32(s->out + s->out_len, (uint32_t)v);
	put32(s->out + s->out_len + 4, (uint32_t)(v >> 32));
	s->out_len += 8;
}

static void out_u32(struct session_s *s, uint32_t v)
{
	put32(s->out + s->out_len, v);
	s->out_len += 4;
}

static void drop_client(struct session_s *s);

/* The gathered message to the client, whole: a short write is finished blocking (the client reads
 * its socket from a thread of its own, so this does not wait long). */
static void flush_out(struct session_s *s)
{
	size_t sent = 0;
	if (s->out_len == 0)
		return;
	if (s->fd < 0) {
		s->out_len = 0;
		return;
	}
	put32(s->out, (uint32_t)(s->out_len - 4));
	while (sent < s->out_len) {
		ssize_t n = write(s->fd, s->out + sent, s->out_len - sent);
		if (n > 0) {
			sent += n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = s->fd, .events = POLLOUT};
			poll(&p, 1, 100);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			drop_client(s);
			return;
		}
	}
	s->messages_to_host++;
	s->out_len = 0;
	s->out_idle = 0;
}

/* -- the client --------------------------------------------------------------------------------- */

static void clear_link_state(struct session_s *s)
{
	struct rx_tlp *t = s->rx_head;
	while (t) {
		struct rx_tlp *next = t->next;
		free(t);
		t = next;
	}
	s->rx_head = s->rx_tail = NULL;
	s->npending = 0;
	s->in_len = 0;
	s->out_len = 0;
}

static void drop_client(struct session_s *s)
{
	if (s->ev) {
		event_del(s->ev);
		event_free(s->ev);
		s->ev = NULL;
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	clear_link_state(s);
}

static void send_status(struct session_s *s)
{
	uint32_t kv[][2] = {
		{KEY_LINK_UP, s->cfg_link_up}, {KEY_BUS_MASTER, s->cfg_bus_master},
		{KEY_MSIX_ENABLE, s->cfg_msix_enable}, {KEY_MSIX_MASK, s->cfg_msix_mask},
		{KEY_MAX_PAYLOAD, s->cfg_mps}, {KEY_MAX_READ_REQUEST, s->cfg_mrrs},
		{KEY_CYCLE_LO, (uint32_t)s->cycle}, {KEY_CYCLE_HI, (uint32_t)(s->cycle >> 32)},
		{KEY_CLK_PERIOD_PS, (uint32_t)s->period_ps},
		{KEY_MILLIPS_PER_BYTE, (uint32_t)llround(1000.0 * s->ps_per_byte)},
		{KEY_LATENCY_PS, (uint32_t)s->latency_ps}, {KEY_FRAMING_BYTES, FRAMING_BYTES},
		{KEY_TLPS_TO_HOST, (uint32_t)s->tlps_to_host}, {KEY_TLPS_FROM_HOST, (uint32_t)s->tlps_from_host},
		{KEY_MESSAGES_TO_HOST, (uint32_t)s->messages_to_host},
		{KEY_MESSAGES_FROM_HOST, (uint32_t)s->messages_from_host},
		{KEY_DATA_WIDTH, 64}, {KEY_GEN, s->gen}, {KEY_LANES, s->lanes},
		{KEY_LAST_COMPLETION_CYCLE_LO, (uint32_t)s->last_completion_cycle},
		{KEY_LAST_COMPLETION_CYCLE_HI, (uint32_t)(s->last_completion_cycle >> 32)},
	};
	int n = sizeof(kv) / sizeof(kv[0]);
	out_begin_record(s, REC_STATUS, 2 * n);
	out_u64(s, s->cycle);
	for (int i = 0; i < n; i++) {
		out_u32(s, kv[i][0]);
		out_u32(s, kv[i][1]);
	}
	flush_out(s);
}

static void apply_config(struct session_s *s, const uint8_t *p, int ndw)
{
	for (int i = 0; i + 1 < ndw; i += 2) {
		uint32_t key = get32(p + 4 * i), v = get32(p + 4 * i + 4);
		switch (key) {
		case KEY_LINK_UP: s->cfg_link_up = !!v; break;
		case KEY_BUS_MASTER: s->cfg_bus_master = !!v; break;
		case KEY_MSIX_ENABLE: s->cfg_msix_enable = !!v; break;
		case KEY_MSIX_MASK: s->cfg_msix_mask = !!v; break;
		case KEY_MAX_PAYLOAD: s->cfg_mps = v; break;
		case KEY_MAX_READ_REQUEST: s->cfg_mrrs = v; break;
		default: break;
		}
	}
	send_status(s);
}

/* A TLP from the client onto the host-to-device wire. */
static void queue_rx_tlp(struct session_s *s, const uint8_t *p, int ndw)
{
	uint32_t dw0 = ndw ? get32(p) : 0;
	uint64_t avail = s->now_ps, start;
	int want = tlp_dwords(dw0);
	if (ndw < 3 || want != ndw) {
		eprintf("pcie2tcp: dropped a TLP of %d dwords whose header says %d\n", ndw, want);
		return;
	}
	if (is_completion(dw0)) {
		/* handed over when its request reached the host; the request's last completion retires it */
		uint32_t dw1 = get32(p + 4), dw2 = get32(p + 8);
		int tag = (dw2 >> 8) & 0xff, status = (dw1 >> 13) & 7;
		int bytes = (dw1 & 0xfff) ? (dw1 & 0xfff) : 4096, len = dw0 & 0x3ff;
		int has_data = (dw0 >> 30) & 1;
		for (int i = 0; i < s->npending; i++) {
			if (s->pending[i].tag != tag)
				continue;
			if (s->pending[i].at_host_ps > avail)
				avail = s->pending[i].at_host_ps;
			if (status != 0 || !has_data || bytes <= 4 * (len ? len : 1024) - (int)(dw2 & 3)) {
				memmove(&s->pending[i], &s->pending[i + 1], (s->npending - i - 1) * sizeof(s->pending[0]));
				s->npending--;
			}
			break;
		}
	}
	struct rx_tlp *t = malloc(sizeof(*t) + 4 * (size_t)(ndw + 1));
	if (!t) {
		eprintf("pcie2tcp: out of memory\n");
		exit(1);
	}
	for (int i = 0; i < ndw; i++)
		t->dw[i] = get32(p + 4 * i);
	t->dw[ndw] = 0;
	t->ndw = ndw;
	t->beats = (ndw + 1) / 2;
	if (!((dw0 >> 29) & 1) && ndw % 2 == 0)
		t->beats++; /* LitePCIe's 64-bit header extracter: see the top of this file */
	t->beat = 0;
	t->completion = is_completion(dw0);
	t->next = NULL;
	start = avail > s->rx_wire_free_ps ? avail : s->rx_wire_free_ps;
	s->rx_wire_free_ps = start + wire_ps(s, ndw);
	t->deliver_ps = s->rx_wire_free_ps + s->latency_ps;
	if (s->rx_tail)
		s->rx_tail->next = t;
	else
		s->rx_head = t;
	s->rx_tail = t;
	s->tlps_from_host++;
}

/* Whole messages in the input buffer: taken apart and acted on. */
static void parse_input(struct session_s *s)
{
	size_t pos = 0;
	while (s->in_len - pos >= 4) {
		uint32_t n = get32(s->in + pos);
		if (s->in_len - pos - 4 < n)
			break;
		const uint8_t *p = s->in + pos + 4, *end = p + n;
		s->messages_from_host++;
		while (end - p >= 4) {
			int kind = p[0], ndw = p[2] | (p[3] << 8);
			p += 4;
			if (end - p < 4 * ndw) {
				eprintf("pcie2tcp: a record runs past its message\n");
				break;
			}
			if (kind == REC_TLP)
				queue_rx_tlp(s, p, ndw);
			else if (kind == REC_CONFIG)
				apply_config(s, p, ndw);
			else
				eprintf("pcie2tcp: unknown record kind %d\n", kind);
			if (s->fd < 0)
				return; /* dropped while answering */
			p += 4 * ndw;
		}
		pos += 4 + n;
	}
	memmove(s->in, s->in + pos, s->in_len - pos);
	s->in_len -= pos;
}

/* What the socket has now; 0 if the client is gone. */
static int read_client(struct session_s *s)
{
	for (;;) {
		if (s->in_cap - s->in_len < 65536) {
			s->in_cap = s->in_cap ? 2 * s->in_cap : 262144;
			s->in = realloc(s->in, s->in_cap);
			if (!s->in) {
				eprintf("pcie2tcp: out of memory\n");
				exit(1);
			}
		}
		ssize_t n = recv(s->fd, s->in + s->in_len, s->in_cap - s->in_len, MSG_DONTWAIT);
		if (n > 0) {
			s->in_len += n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		drop_client(s);
		return 0;
	}
	parse_input(s);
	return s->fd >= 0;
}

static void on_readable(int fd, short what, void *arg)
{
	struct session_s *s = arg;
	if (what & EV_READ)
		read_client(s);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *a, int alen, void *ctx)
{
	struct session_s *s = ctx;
	int one = 1;
	drop_client(s); /* one client at a time: the newest */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->fd = fd;
	s->ev = event_new(base, fd, EV_READ | EV_PERSIST, on_readable, s);
	event_add(s->ev, NULL);
}

static void on_listen_error(struct evconnlistener *l, void *ctx)
{
	eprintf("pcie2tcp: listener error: %s\n", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	event_base_loopexit(evconnlistener_get_base(l), NULL);
}

/* Simulated time stops here while a device read has reached the host and is not answered yet. */
static void wait_for_answers(struct session_s *s)
{
	int flushed = 0;
	while (s->fd >= 0 && s->npending && s->pending[0].at_host_ps <= s->now_ps) {
		if (!flushed) {
			flush_out(s);
			flushed = 1;
			continue;
		}
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		if (poll(&p, 1, 1000) > 0)
			read_client(s);
	}
}

/* -- litex_sim ---------------------------------------------------------------------------------- */

static int pcie2tcp_start(void *b)
{
	base = (struct event_base *)b;
	printf("[pcie2tcp] loaded (%p)\n", base);
	return RC_OK;
}

static int pcie2tcp_new(void **sess, char *args)
{
	json_object *js = args ? json_tokener_parse(args) : NULL;
	struct sockaddr_in sin;
	struct session_s *s;
	int port = arg_int(js, "port", 0);
	double lane_bytes_per_ns;
	*sess = NULL;
	if (port <= 0 || port > 65535) {
		eprintf("pcie2tcp: a \"port\" is needed in the module's args (%s)\n", args ? args : "none");
		if (js)
			json_object_put(js);
		return RC_ERROR;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return RC_NOENMEM;
	s->fd = -1;
	s->gen = arg_int(js, "gen", 2);
	s->lanes = arg_int(js, "lanes", 1);
	s->latency_ps = 1000ULL * arg_int(js, "latency_ns", 250);
	s->cfg_link_up = arg_int(js, "link_up", 1);
	s->cfg_bus_master = arg_int(js, "bus_master", 0);
	s->cfg_msix_enable = arg_int(js, "msix_enable", 0);
	s->cfg_msix_mask = arg_int(js, "msix_mask", 0);
	s->cfg_mps = arg_int(js, "max_payload", 128);
	s->cfg_mrrs = arg_int(js, "max_read_request", 512);
	if (js)
		json_object_put(js);
	switch (s->gen) {
	case 1: lane_bytes_per_ns = 2.5 * 8 / 10 / 8; break;
	case 2: lane_bytes_per_ns = 5.0 * 8 / 10 / 8; break;
	case 3: lane_bytes_per_ns = 8.0 * 128 / 130 / 8; break;
	default:
		eprintf("pcie2tcp: gen %d: 1, 2 or 3\n", s->gen);
		free(s);
		return RC_ERROR;
	}
	if (s->lanes < 1 || s->lanes > 16) {
		eprintf("pcie2tcp: lanes %d: 1 to 16\n", s->lanes);
		free(s);
		return RC_ERROR;
	}
	s->ps_per_byte = 1000.0 / (lane_bytes_per_ns * s->lanes);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x7f000001);
	sin.sin_port = htons(port);
	struct evconnlistener *l = evconnlistener_new_bind(base, on_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
							   -1, (struct sockaddr *)&sin, sizeof(sin));
	if (!l) {
		eprintf("pcie2tcp: can't bind port %d\n", port);
		free(s);
		return RC_ERROR;
	}
	evconnlistener_set_error_cb(l, on_listen_error);
	*sess = s;
	return RC_OK;
}

static void *pad(struct pad_s *pads, const char *name)
{
	void *sig = sim_pad(pads, name);
	if (!sig)
		eprintf("pcie2tcp: no pad %s\n", name);
	return sig;
}

static int pcie2tcp_add_pads(void *sess, struct pad_list_s *plist)
{
	struct session_s *s = sess;
	if (!s || !plist)
		return RC_INVARG;
	if (!strcmp(plist->name, "pcie_sim")) {
		struct pad_s *p = plist->pads;
		s->tx_valid = pad(p, "tx_valid");
		s->tx_ready = pad(p, "tx_ready");
		s->tx_last = pad(p, "tx_last");
		s->tx_data = pad(p, "tx_data");
		s->rx_valid = pad(p, "rx_valid");
		s->rx_ready = pad(p, "rx_ready");
		s->rx_last = pad(p, "rx_last");
		s->rx_data = pad(p, "rx_data");
		s->link_up = pad(p, "link_up");
		s->bus_master = pad(p, "bus_master");
		s->msix_enable = pad(p, "msix_enable");
		s->msix_mask = pad(p, "msix_mask");
		s->max_payload = pad(p, "max_payload");
		s->max_read_request = pad(p, "max_read_request");
		if (!s->tx_valid || !s->tx_ready || !s->tx_last || !s->tx_data || !s->rx_valid || !s->rx_ready ||
		    !s->rx_last || !s->rx_data || !s->link_up || !s->bus_master || !s->msix_enable || !s->msix_mask ||
		    !s->max_payload || !s->max_read_request)
			return RC_ERROR;
	}
	if (!strcmp(plist->name, "sys_clk"))
		s->sys_clk = pad(plist->pads, "sys_clk");
	return RC_OK;
}

/* The TLP gathered from the device is complete: onto the device-to-host wire, into the message. */
static void tlp_from_device(struct session_s *s)
{
	uint32_t dw0 = s->gather[0];
	int ndw = tlp_dwords(dw0);
	uint64_t start, at_host;
	if (s->gather_overflow || ndw == 0 || ndw > MAX_TLP_DW) {
		eprintf("pcie2tcp: the device sent a TLP this link does not carry (dw0 %08x)\n", dw0);
		return;
	}
	if (s->gather_ndw < ndw) {
		if (!s->warned_short++)
			eprintf("pcie2tcp: the device sent a TLP shorter than its header says (%d of %d dwords)\n",
				s->gather_ndw, ndw);
		memset(&s->gather[s->gather_ndw], 0, 4 * (size_t)(ndw - s->gather_ndw));
	}
	start = s->now_ps > s->tx_wire_free_ps ? s->now_ps : s->tx_wire_free_ps;
	s->tx_hold_until_ps = start;
	s->tx_wire_free_ps = start + wire_ps(s, ndw);
	at_host = s->tx_wire_free_ps + s->latency_ps;
	if (s->fd < 0)
		return;
	if (is_memory_read(dw0)) {
		if (s->npending == MAX_PENDING) {
			eprintf("pcie2tcp: more than %d reads of host memory in flight\n", MAX_PENDING);
			exit(1);
		}
		s->pending[s->npending].tag = (s->gather[1] >> 8) & 0xff;
		s->pending[s->npending].at_host_ps = at_host;
		s->npending++;
	}
	out_begin_record(s, REC_TLP, ndw);
	out_u64(s, s->cycle);
	out_u64(s, cycles_until(s, at_host));
	for (int i = 0; i < ndw; i++)
		out_u32(s, s->gather[i]);
	s->tlps_to_host++;
	if (s->out_len >= FLUSH_BYTES)
		flush_out(s);
}

static int pcie2tcp_tick(void *sess, uint64_t time_ps)
{
	struct session_s *s = sess;
	if (!clk_pos_edge(&s->edge, *s->sys_clk))
		return RC_OK;
	if (s->cycle && !s->period_ps)
		s->period_ps = time_ps - s->last_edge_ps;
	s->last_edge_ps = time_ps;
	s->now_ps = time_ps;
	s->cycle++;

	*s->link_up = s->cfg_link_up;
	*s->bus_master = s->cfg_bus_master;
	*s->msix_enable = s->cfg_msix_enable;
	*s->msix_mask = s->cfg_msix_mask;
	*s->max_payload = s->cfg_mps;
	*s->max_read_request = s->cfg_mrrs;

	wait_for_answers(s);

	/* device -> host: the PHY's registered beat, taken if the wire is not holding a TLP back */
	*s->tx_ready = s->now_ps >= s->tx_hold_until_ps;
	if (*s->tx_valid && *s->tx_ready) {
		uint64_t d = *s->tx_data;
		if (s->gather_ndw + 2 <= MAX_TLP_DW) {
			s->gather[s->gather_ndw++] = (uint32_t)d;
			s->gather[s->gather_ndw++] = (uint32_t)(d >> 32);
		} else {
			s->gather_overflow = 1;
		}
		if (*s->tx_last) {
			tlp_from_device(s);
			s->gather_ndw = 0;
			s->gather_overflow = 0;
		}
		s->out_idle = 0;
	} else if (s->out_len && ++s->out_idle >= FLUSH_IDLE_CYCLES) {
		flush_out(s);
	}

	/* host -> device: the head TLP's next beat once it has arrived, if the PHY takes one */
	*s->rx_valid = 0;
	*s->rx_last = 0;
	struct rx_tlp *t = s->rx_head;
	if (t && s->now_ps >= t->deliver_ps && *s->rx_ready) {
		int i = 2 * t->beat;
		*s->rx_data = (i < t->ndw ? t->dw[i] : 0) | ((uint64_t)(i + 1 < t->ndw ? t->dw[i + 1] : 0) << 32);
		*s->rx_valid = 1;
		*s->rx_last = ++t->beat == t->beats;
		if (t->beat == t->beats) {
			if (t->completion)
				s->last_completion_cycle = s->cycle;
			s->rx_head = t->next;
			if (!s->rx_head)
				s->rx_tail = NULL;
			free(t);
		}
	}
	return RC_OK;
}

static struct ext_module_s ext_mod = {
	"pcie2tcp", pcie2tcp_start, pcie2tcp_new, pcie2tcp_add_pads, NULL, pcie2tcp_tick,
};

int litex_sim_ext_module_init(int (*register_module)(struct ext_module_s *))
{
	return register_module(&ext_mod);
}
