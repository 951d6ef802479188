/* atomflash firmware: the FTL's choices that read no hardware.
 *
 * GC's victim (gc.c) and dynamic wear levelling's next block (ftl.c's pool) are decided here from plain
 * numbers -- a block's valid pages and close_seq, the pool's erase counts -- so the same code runs on the
 * host: sim/gcsim builds it with a host model of the core's page writes and valid counts to measure write
 * amplification on devices far larger than the full SoC simulates (docs/firmware.md, *GC policies*).
 *
 * Victims (spec.GcPolicy, console `gc policy`):
 *  - greedy: the fewest valid pages (the most pages freed per erase);
 *  - cost-benefit: (1 - u) / 2u x age, u = valid / ppb: pages freed over pages moved (each read and
 *    programmed once), weighted by the time since the block closed (old data that has stayed valid is
 *    likely to stay so: collecting it now spares moving it again soon);
 *  - cost-benefit-lfs: (1 - u) / (1 + u) x age, LFS's cleaner (Rosenblum & Ousterhout), whose cost counts
 *    reading the whole segment.
 * Scores are scaled integers; a block with no valid page scores highest under every policy (it frees a
 * block for an erase alone). */
#include "policy.h"

void af_policy_victim_begin(af_policy_victim_t *v, unsigned policy, uint32_t ppb, uint64_t now)
{
	v->policy = policy;
	v->ppb = ppb;
	v->now = now;
	v->best = 0;
	v->victim = 0;
	v->found = 0;
}

#define AGE_MAX (1ull << 40) /* ages saturate here: x ppb x 1024 stays in 64 bits for ppb < 2^14 */

uint64_t af_policy_score(unsigned policy, uint32_t valid, uint32_t ppb, uint64_t age)
{
	uint64_t freed = ppb - valid;
	if (policy == AF_GCPOLICY_GREEDY)
		return freed;
	if (valid == 0)
		return UINT64_MAX;
	if (age > AGE_MAX)
		age = AGE_MAX;
	if (policy == AF_GCPOLICY_COST_BENEFIT_LFS)
		return freed * age * 1024 / (ppb + valid);
	return freed * age * 1024 / (2ull * valid); /* AF_GCPOLICY_COST_BENEFIT */
}

void af_policy_victim_consider(af_policy_victim_t *v, uint32_t g, uint32_t valid, uint64_t close_seq)
{
	if (valid >= v->ppb)
		return; /* nothing to gain */
	uint64_t age = v->now > close_seq ? v->now - close_seq : 1;
	uint64_t score = af_policy_score(v->policy, valid, v->ppb, age);
	if (!v->found || score > v->best) {
		v->best = score;
		v->victim = g;
		v->found = 1;
	}
}

/* c of a policy's spec name as the console writes it: lower case, '-' for '_' */
static char console_char(char c)
{
	return c == '_' ? '-' : c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

int af_policy_named(const char *name)
{
	for (unsigned p = 0;; p++) {
		const char *spec = af_gcpolicy_name(p);
		if (spec[0] == '?')
			return -1;
		size_t i = 0;
		while (spec[i] && name[i] && console_char(spec[i]) == name[i])
			i++;
		if (!spec[i] && !name[i])
			return (int)p;
	}
}

void af_policy_name(unsigned policy, char *out, size_t n)
{
	const char *spec = af_gcpolicy_name(policy);
	size_t i = 0;
	for (; spec[i] && i + 1 < n; i++)
		out[i] = console_char(spec[i]);
	out[i] = 0;
}

uint32_t af_policy_least_worn(const uint32_t *wear, uint32_t n)
{
	uint32_t best = n - 1; /* ties: the stack's top */
	uint32_t least = wear[best];
	for (uint32_t i = best; i-- > 0;)
		if (wear[i] < least) {
			best = i;
			least = wear[i];
		}
	return best;
}
