/* What atomflash's litex_sim modules (soc/hostport2tcp.c, soc/eth2udp.c, soc/pcie2tcp.c) share:
 * their string arguments from the module's JSON args and their pads by name.  Built with them by
 * soc/sim.py (build_sim_module), which rebuilds a module when this header changes too.
 */
#ifndef AF_SIM_MODULE_H
#define AF_SIM_MODULE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "error.h"
#include "modules.h"

/* ``args``' string ``key`` (strdup'ed into *val), or RC_JSERROR naming the module ``who``. */
static inline int sim_arg(const char *who, const char *args, const char *key, char **val)
{
	json_object *obj = NULL, *js = args ? json_tokener_parse(args) : NULL;
	*val = NULL;
	if (!js || !json_object_is_type(js, json_type_object) || !json_object_object_get_ex(js, key, &obj)) {
		fprintf(stderr, "%s: missing \"%s\" in the module's args (%s)\n", who, key, args ? args : "none");
		if (js)
			json_object_put(js);
		return RC_JSERROR;
	}
	*val = strdup(json_object_get_string(obj));
	json_object_put(js);
	return RC_OK;
}

/* The signal of the pad ``name`` in a pad list, or NULL. */
static inline void *sim_pad(struct pad_s *pads, const char *name)
{
	for (int i = 0; pads && pads[i].name; i++)
		if (!strcmp(pads[i].name, name))
			return pads[i].signal;
	return NULL;
}

/* A byte stream's pads (LiteX's serial pads, LiteEth's PHY model): the stream into the SoC (its
 * sink: rx) and out of it (its source: tx). */
static inline void sim_stream_pads(struct pad_s *pads, char **rx, char **rx_valid, char **rx_ready, char **tx,
				   char **tx_valid, char **tx_ready)
{
	*rx = sim_pad(pads, "sink_data");
	*rx_valid = sim_pad(pads, "sink_valid");
	*rx_ready = sim_pad(pads, "sink_ready");
	*tx = sim_pad(pads, "source_data");
	*tx_valid = sim_pad(pads, "source_valid");
	*tx_ready = sim_pad(pads, "source_ready");
}

#endif
