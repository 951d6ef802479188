/* eth2udp: the simulated SoC's Ethernet port as a UDP service on the loopback, no root needed.
 *
 * LiteX's own sim modules put the Ethernet PHY model on a tap interface, which takes root and a
 * network setup.  This one is the SoC's whole LAN instead: a gateway host at `gateway_ip` /
 * `gateway_mac` that the SoC sees on the wire, and a UDP socket on 127.0.0.1:`port` that host
 * programs talk to.
 *
 *   host program --UDP--> 127.0.0.1:port --> [eth2udp] --Ethernet/IPv4/UDP frame--> SoC ip:udp_port
 *   host program <--UDP-- 127.0.0.1:port <-- [eth2udp] <--Ethernet/IPv4/UDP frame--- SoC
 *
 * A datagram from a host program becomes one frame from the gateway to the SoC's `udp_port`
 * (Etherbone's).  A UDP frame the SoC sends to the gateway goes back, payload only, to the host
 * program that sent the last datagram (the SoC answers Etherbone to the asker's address, so one
 * asker at a time is what the SoC itself supports).  The module answers the SoC's ARP requests
 * for the gateway; every other frame is counted and dropped.  IPv4 headers carry a correct
 * checksum; the UDP checksum is 0 (none), as IPv4 allows and LiteEth sends.
 *
 * Wire timing: LiteEth's PHY model moves one byte per system clock with neither preamble nor FCS
 * (`LiteEthPHYModel.with_preamble_crc`), so each frame into the SoC is followed by WIRE_GAP idle
 * cycles standing for them and the inter-frame gap (8 + 4 + 12 byte times): the simulated link is
 * a gigabit wire clocked at the system clock.  Frames wait in a queue of RX_FRAMES; when it is
 * full, datagrams wait in the socket (and the kernel drops what overflows it, as a network would).
 * The socket is read every POLL_CYCLES as well as from the simulator's event loop, which runs
 * only every 500 cycles: a datagram waits at most that long, the LAN's only latency here (a real
 * host's network stack adds tens of microseconds per round trip).
 *
 * Built by soc/sim.py into the gateware's modules/; named in a run's sim_config.js by
 * atomflash.simctl.prepare_run_dir (`etherbone_port`).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>
#include <json-c/json.h>

#include "error.h"
#include "modules.h"
#include "sim_module.h"

#define FRAME_MAX 1536	/* an Ethernet frame without FCS, rounded up */
#define FRAME_MIN 60	/* shorter frames are padded (the FCS makes it 64) */
#define RX_FRAMES 32	/* frames queued for the SoC */
#define WIRE_GAP 24	/* preamble + SFD (8), FCS (4), inter-frame gap (12) */
#define POLL_CYCLES 64	/* the socket is read this often besides the simulator's event loop (every 500) */
#define ETH_HDR 14
#define IP_HDR 20
#define UDP_HDR 8
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_ARP 0x0806
#define IPPROTO_UDP_ 17

struct frame_s {
	uint8_t data[FRAME_MAX];
	int len;
};

struct session_s {
	char *tx, *tx_valid, *tx_ready; /* frames out of the SoC (the PHY model's source) */
	char *rx, *rx_valid, *rx_ready; /* frames into the SoC (its sink) */
	char *sys_clk;
	clk_edge_state_t edge;
	int fd;
	struct event *ev;
	struct sockaddr_in peer; /* the host program that spoke last */
	int have_peer;
	uint8_t soc_mac[6], gw_mac[6];
	uint32_t soc_ip, gw_ip; /* host order */
	int udp_port;
	uint16_t ip_id;
	/* out of the SoC */
	uint8_t tx_frame[FRAME_MAX];
	int tx_len, tx_overflow;
	/* into the SoC: a ring of frames, the head one on the wire */
	struct frame_s rx_q[RX_FRAMES];
	int rx_head, rx_count, rx_pos, rx_gap;
	int poll;
	/* counters, printed when the simulation ends */
	unsigned long frames_in, frames_out, arp_answers, dropped;
};

static struct event_base *base;

static int parse_mac(const char *text, uint8_t mac[6])
{
	unsigned v[6];
	if (sscanf(text, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -1;
		mac[i] = v[i];
	}
	return 0;
}

static int parse_ip(const char *text, uint32_t *ip)
{
	struct in_addr a;
	if (inet_pton(AF_INET, text, &a) != 1)
		return -1;
	*ip = ntohl(a.s_addr);
	return 0;
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

static unsigned get16(const uint8_t *p)
{
	return (p[0] << 8) | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return ((uint32_t)get16(p) << 16) | get16(p + 2);
}

static unsigned ip_checksum(const uint8_t *hdr)
{
	uint32_t sum = 0;
	for (int i = 0; i < IP_HDR; i += 2)
		sum += get16(hdr + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

/* The queue's next free frame, or NULL when full. */
static struct frame_s *rx_slot(struct session_s *s)
{
	if (s->rx_count == RX_FRAMES)
		return NULL;
	return &s->rx_q[(s->rx_head + s->rx_count) % RX_FRAMES];
}

static void rx_push(struct session_s *s, struct frame_s *f)
{
	if (f->len < FRAME_MIN) {
		memset(f->data + f->len, 0, FRAME_MIN - f->len);
		f->len = FRAME_MIN;
	}
	s->rx_count++;
}

static void eth_header(uint8_t *p, const uint8_t dst[6], const uint8_t src[6], unsigned type)
{
	memcpy(p, dst, 6);
	memcpy(p + 6, src, 6);
	put16(p + 12, type);
}

static void on_readable(int fd, short what, void *arg)
{
	struct session_s *s = arg;
	for (;;) {
		struct frame_s *f = rx_slot(s);
		if (!f)
			return; /* full: datagrams wait in the socket (asked again next loop) */
		uint8_t *p = f->data;
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		int room = FRAME_MAX - ETH_HDR - IP_HDR - UDP_HDR;
		ssize_t n = recvfrom(fd, p + ETH_HDR + IP_HDR + UDP_HDR, room, MSG_TRUNC, (struct sockaddr *)&from, &flen);
		if (n < 0)
			return; /* EAGAIN: nothing more */
		if (n > room) {
			s->dropped++; /* larger than one frame carries */
			continue;
		}
		s->peer = from;
		s->have_peer = 1;
		eth_header(p, s->soc_mac, s->gw_mac, ETHERTYPE_IPV4);
		uint8_t *ip = p + ETH_HDR;
		memset(ip, 0, IP_HDR);
		ip[0] = 0x45;
		put16(ip + 2, IP_HDR + UDP_HDR + n);
		put16(ip + 4, s->ip_id++);
		put16(ip + 6, 0x4000); /* don't fragment */
		ip[8] = 64;
		ip[9] = IPPROTO_UDP_;
		put32(ip + 12, s->gw_ip);
		put32(ip + 16, s->soc_ip);
		put16(ip + 10, ip_checksum(ip));
		uint8_t *udp = ip + IP_HDR;
		put16(udp, s->udp_port); /* the SoC answers Etherbone on its own port */
		put16(udp + 2, s->udp_port);
		put16(udp + 4, UDP_HDR + n);
		put16(udp + 6, 0);
		f->len = ETH_HDR + IP_HDR + UDP_HDR + n;
		rx_push(s, f);
	}
}

static void answer_arp(struct session_s *s, const uint8_t *arp)
{
	/* htype 1, ptype IPv4, hlen 6, plen 4, op 1 (request) for the gateway's address */
	if (get16(arp) != 1 || get16(arp + 2) != ETHERTYPE_IPV4 || arp[4] != 6 || arp[5] != 4 || get16(arp + 6) != 1 ||
	    get32(arp + 24) != s->gw_ip) {
		s->dropped++;
		return;
	}
	struct frame_s *f = rx_slot(s);
	if (!f) {
		s->dropped++;
		return;
	}
	uint8_t *p = f->data, *r = p + ETH_HDR;
	eth_header(p, arp + 8, s->gw_mac, ETHERTYPE_ARP);
	put16(r, 1);
	put16(r + 2, ETHERTYPE_IPV4);
	r[4] = 6;
	r[5] = 4;
	put16(r + 6, 2); /* reply */
	memcpy(r + 8, s->gw_mac, 6);
	put32(r + 14, s->gw_ip);
	memcpy(r + 18, arp + 8, 10); /* the asker's MAC and IP */
	f->len = ETH_HDR + 28;
	rx_push(s, f);
	s->arp_answers++;
}

/* A whole frame from the SoC. */
static void from_soc(struct session_s *s, const uint8_t *p, int len)
{
	s->frames_out++;
	if (len < ETH_HDR) {
		s->dropped++;
		return;
	}
	unsigned type = get16(p + 12);
	if (type == ETHERTYPE_ARP && len >= ETH_HDR + 28) {
		answer_arp(s, p + ETH_HDR);
		return;
	}
	const uint8_t *ip = p + ETH_HDR;
	if (type != ETHERTYPE_IPV4 || len < ETH_HDR + IP_HDR + UDP_HDR || ip[0] != 0x45 || ip[9] != IPPROTO_UDP_ ||
	    get32(ip + 16) != s->gw_ip || memcmp(p, s->gw_mac, 6) != 0) {
		s->dropped++;
		return;
	}
	const uint8_t *udp = ip + IP_HDR;
	int ulen = get16(udp + 4);
	if (ulen < UDP_HDR || ETH_HDR + IP_HDR + ulen > len || !s->have_peer) {
		s->dropped++;
		return;
	}
	sendto(s->fd, udp + UDP_HDR, ulen - UDP_HDR, 0, (struct sockaddr *)&s->peer, sizeof(s->peer));
}

static int eth2udp_start(void *b)
{
	base = (struct event_base *)b;
	printf("[eth2udp] loaded (%p)\n", base);
	return RC_OK;
}

static int eth2udp_new(void **sess, char *args)
{
	static const char *keys[] = {"port", "ip", "mac", "gateway_ip", "gateway_mac", "udp_port"};
	char *v[6] = {0};
	struct session_s *s = calloc(1, sizeof(*s));
	int ret = RC_OK, port = 0;
	*sess = NULL;
	if (!s)
		return RC_NOENMEM;
	for (int i = 0; i < 6 && ret == RC_OK; i++)
		ret = sim_arg("eth2udp", args, keys[i], &v[i]);
	if (ret == RC_OK) {
		port = atoi(v[0]);
		s->udp_port = atoi(v[5]);
		if (port <= 0 || port > 65535 || s->udp_port <= 0 || s->udp_port > 65535 || parse_ip(v[1], &s->soc_ip) ||
		    parse_mac(v[2], s->soc_mac) || parse_ip(v[3], &s->gw_ip) || parse_mac(v[4], s->gw_mac)) {
			eprintf("eth2udp: invalid args %s\n", args);
			ret = RC_ERROR;
		}
	}
	for (int i = 0; i < 6; i++)
		free(v[i]);
	if (ret != RC_OK) {
		free(s);
		return ret;
	}
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	s->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		eprintf("eth2udp: can't bind udp://127.0.0.1:%d: %s\n", port, strerror(errno));
		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return RC_ERROR;
	}
	evutil_make_socket_nonblocking(s->fd);
	s->ev = event_new(base, s->fd, EV_READ | EV_PERSIST, on_readable, s);
	event_add(s->ev, NULL);
	*sess = s;
	return RC_OK;
}

static int eth2udp_add_pads(void *sess, struct pad_list_s *plist)
{
	struct session_s *s = sess;
	if (!s || !plist)
		return RC_INVARG;
	if (!strcmp(plist->name, "eth"))
		sim_stream_pads(plist->pads, &s->rx, &s->rx_valid, &s->rx_ready, &s->tx, &s->tx_valid, &s->tx_ready);
	if (!strcmp(plist->name, "sys_clk"))
		s->sys_clk = sim_pad(plist->pads, "sys_clk");
	return RC_OK;
}

static int eth2udp_tick(void *sess, uint64_t time_ps)
{
	struct session_s *s = sess;
	if (!clk_pos_edge(&s->edge, *s->sys_clk))
		return RC_OK;

	/* out of the SoC: a frame is the bytes of one run of valid */
	*s->tx_ready = 1;
	if (*s->tx_valid) {
		if (s->tx_len < FRAME_MAX)
			s->tx_frame[s->tx_len++] = *s->tx;
		else
			s->tx_overflow = 1;
	} else if (s->tx_len) {
		if (s->tx_overflow)
			s->dropped++;
		else
			from_soc(s, s->tx_frame, s->tx_len);
		s->tx_len = s->tx_overflow = 0;
	}

	if (++s->poll == POLL_CYCLES) {
		s->poll = 0;
		on_readable(s->fd, EV_READ, s);
	}

	/* into the SoC: the head frame a byte per cycle, then the gap */
	*s->rx_valid = 0;
	if (s->rx_gap) {
		s->rx_gap--;
	} else if (s->rx_count) {
		struct frame_s *f = &s->rx_q[s->rx_head];
		*s->rx_valid = 1;
		*s->rx = f->data[s->rx_pos++];
		if (s->rx_pos == f->len) {
			s->rx_pos = 0;
			s->rx_head = (s->rx_head + 1) % RX_FRAMES;
			s->rx_count--;
			s->rx_gap = WIRE_GAP;
			s->frames_in++;
		}
	}
	return RC_OK;
}

static int eth2udp_close(void *sess)
{
	struct session_s *s = sess;
	if (!s)
		return RC_OK;
	printf("[eth2udp] frames to the SoC %lu, from it %lu, ARP answers %lu, dropped %lu\n", s->frames_in,
	       s->frames_out, s->arp_answers, s->dropped);
	if (s->ev) {
		event_del(s->ev);
		event_free(s->ev);
	}
	close(s->fd);
	free(s);
	return RC_OK;
}

static struct ext_module_s ext_mod = {
	"eth2udp", eth2udp_start, eth2udp_new, eth2udp_add_pads, eth2udp_close, eth2udp_tick,
};

int litex_sim_ext_module_init(int (*register_module)(struct ext_module_s *))
{
	return register_module(&ext_mod);
}
