/* atomflash firmware: the FTL's choices that read no hardware (see policy.c). */
#ifndef AF_POLICY_H
#define AF_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "atomflash_spec.h"

/* GC's victim under a policy (spec.GcPolicy), over the candidates one pass offers */
typedef struct {
	unsigned policy;  /* AF_GCPOLICY_* */
	uint32_t ppb;     /* pages per block */
	uint64_t now;     /* the log's next seq: a block's age is now - its close_seq */
	uint64_t best;    /* the victim's score */
	uint32_t victim;  /* valid when found */
	int found;
} af_policy_victim_t;

void af_policy_victim_begin(af_policy_victim_t *v, unsigned policy, uint32_t ppb, uint64_t now);
/* Block g, holding `valid` bound pages, every page of it older than close_seq: the victim if it scores
 * higher than every block before it (ties: the first).  A full block (valid >= ppb) frees nothing and is
 * never one. */
void af_policy_victim_consider(af_policy_victim_t *v, uint32_t g, uint32_t valid, uint64_t close_seq);
/* A block's score under the policy (higher: collected first); valid < ppb. */
uint64_t af_policy_score(unsigned policy, uint32_t valid, uint32_t ppb, uint64_t age);
/* The policy named `name` (spec.GcPolicy's name in lower case, '-' for '_': "cost-benefit"), or -1. */
int af_policy_named(const char *name);
/* The policy's name as af_policy_named takes it, in out[0..n) (n >= 1). */
void af_policy_name(unsigned policy, char *out, size_t n);

/* Dynamic wear levelling: index in wear[0..n) of the least-worn block (ties: the last, the stack's top). */
uint32_t af_policy_least_worn(const uint32_t *wear, uint32_t n);

#endif
