/* hostport2tcp: the simulated SoC's host port (UARTBone) on a TCP socket.
 *
 * A litex_sim module like LiteX's serial2tcp (same pads, same "port" argument, one client at a
 * time, the newest connection wins), written for throughput.  serial2tcp sends every byte the
 * SoC puts out with a write() of its own: a 4 KiB read through UARTBone is 4,096 system calls
 * and as many TCP segments, and the simulation spent most of a campaign trial's read-back there
 * (5.3 s of wall time for 370 k cycles, against ~290 k cycles per second while it computes).
 * This module gathers what the SoC sends and writes it when the SoC stops sending for
 * FLUSH_IDLE_CYCLES or the buffer is full: one segment per answer (UARTBone answers a burst of
 * words with a few cycles between them).  The socket has TCP_NODELAY, so a flush leaves at once.
 *
 * Both directions keep what they cannot pass on yet: received bytes wait in the socket while
 * the ring is full (serial2tcp read 1,024 whatever room was left), and the SoC's stream is held
 * (source ready low) while the send buffer is full and the socket will not take it.
 *
 * Built by soc/sim.py into the gateware's modules/ beside LiteX's; soc/sim.py names it in the
 * run's sim_config.js when a host port is asked for.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

#define RX_RING 2048	      /* as serial2tcp's: atomflash.transport's WINDOW_BYTES counts on it */
#define TX_BUF 8192	      /* an answer of 255 words and then some */
#define FLUSH_IDLE_CYCLES 64  /* the SoC quiet this long: its answer is complete */

struct session_s {
	char *tx, *tx_valid, *tx_ready; /* the SoC's stream out (source) */
	char *rx, *rx_valid, *rx_ready; /* the stream into the SoC (sink) */
	char *sys_clk;
	clk_edge_state_t edge;
	struct event *ev;
	int fd; /* -1: no client */
	char rx_ring[RX_RING];
	int rx_start, rx_len;
	char tx_buf[TX_BUF];
	int tx_len, tx_idle;
};

static struct event_base *base;

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
	s->tx_len = 0; /* an answer to a client that left */
}

static void on_readable(int fd, short what, void *arg)
{
	struct session_s *s = arg;
	char buf[RX_RING];
	int room = RX_RING - s->rx_len;
	if (!(what & EV_READ) || room == 0)
		return; /* full: the bytes wait in the socket (level-triggered: asked again next loop) */
	ssize_t n = read(fd, buf, room);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		drop_client(s); /* the client closed the link: the next one may connect */
		return;
	}
	for (ssize_t i = 0; i < n; i++)
		s->rx_ring[(s->rx_start + s->rx_len + i) % RX_RING] = buf[i];
	if (n > 0)
		s->rx_len += n;
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
	eprintf("hostport2tcp: listener error: %s\n", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	event_base_loopexit(evconnlistener_get_base(l), NULL);
}

/* Send what the buffer holds; what the socket does not take now stays for the next try. */
static int flush_tx(struct session_s *s)
{
	int sent = 0;
	while (s->fd >= 0 && sent < s->tx_len) {
		ssize_t n = write(s->fd, s->tx_buf + sent, s->tx_len - sent);
		if (n > 0) {
			sent += n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			drop_client(s); /* the client is gone (EPIPE, reset) */
			return RC_OK;
		}
	}
	memmove(s->tx_buf, s->tx_buf + sent, s->tx_len - sent);
	s->tx_len -= sent;
	return RC_OK;
}

static int hostport2tcp_start(void *b)
{
	base = (struct event_base *)b;
	printf("[hostport2tcp] loaded (%p)\n", base);
	return RC_OK;
}

static int hostport2tcp_new(void **sess, char *args)
{
	char *cport = NULL;
	struct sockaddr_in sin;
	struct session_s *s;
	int port, ret = sim_arg("hostport2tcp", args, "port", &cport);
	*sess = NULL;
	if (ret != RC_OK)
		return ret;
	port = atoi(cport);
	free(cport);
	if (port <= 0 || port > 65535) {
		eprintf("hostport2tcp: invalid port in %s\n", args);
		return RC_ERROR;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return RC_NOENMEM;
	s->fd = -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0);
	sin.sin_port = htons(port);
	struct evconnlistener *l = evconnlistener_new_bind(base, on_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
							   -1, (struct sockaddr *)&sin, sizeof(sin));
	if (!l) {
		eprintf("hostport2tcp: can't bind port %d\n", port);
		free(s);
		return RC_ERROR;
	}
	evconnlistener_set_error_cb(l, on_listen_error);
	*sess = s;
	return RC_OK;
}

static int hostport2tcp_add_pads(void *sess, struct pad_list_s *plist)
{
	struct session_s *s = sess;
	if (!s || !plist)
		return RC_INVARG;
	if (!strcmp(plist->name, "serial"))
		sim_stream_pads(plist->pads, &s->rx, &s->rx_valid, &s->rx_ready, &s->tx, &s->tx_valid, &s->tx_ready);
	if (!strcmp(plist->name, "sys_clk"))
		s->sys_clk = sim_pad(plist->pads, "sys_clk");
	return RC_OK;
}

static int hostport2tcp_tick(void *sess, uint64_t time_ps)
{
	struct session_s *s = sess;
	if (!clk_pos_edge(&s->edge, *s->sys_clk))
		return RC_OK;

	/* out of the SoC: a byte taken on this edge if ready was high for it */
	if (*s->tx_valid && *s->tx_ready) {
		s->tx_buf[s->tx_len++] = *s->tx;
		s->tx_idle = 0;
	} else if (s->tx_len) {
		s->tx_idle++;
	}
	if (s->tx_len && (s->tx_len == TX_BUF || s->tx_idle >= FLUSH_IDLE_CYCLES))
		flush_tx(s);
	if (s->fd < 0)
		s->tx_len = 0; /* no client: what the SoC says is lost, as on a wire nobody listens to */
	*s->tx_ready = s->tx_len < TX_BUF;

	/* into the SoC: the ring's next byte, taken if the sink was ready */
	*s->rx_valid = 0;
	if (s->rx_len) {
		*s->rx = s->rx_ring[s->rx_start];
		*s->rx_valid = 1;
		if (*s->rx_ready) {
			s->rx_start = (s->rx_start + 1) % RX_RING;
			s->rx_len--;
		}
	}
	return RC_OK;
}

static struct ext_module_s ext_mod = {
	"hostport2tcp", hostport2tcp_start, hostport2tcp_new, hostport2tcp_add_pads, NULL, hostport2tcp_tick,
};

int litex_sim_ext_module_init(int (*register_module)(struct ext_module_s *))
{
	return register_module(&ext_mod);
}
