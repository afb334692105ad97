/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* Running a chain. Selectors are evaluated inline, by whichever program decides where the
 * chain goes next (the dispatcher for the leading selectors, an actor for those after it);
 * only actors are programs of their own, reached by tail call. A tail call costs about 8 ns
 * with the context stored and loaded again, more than most selectors do, so a chain costs one
 * tail call per actor that runs and none per selector. */
#ifndef NENA_CHAIN_H
#define NENA_CHAIN_H

#include "common.h"
#include "selectors.h"

static __always_inline void count(__u32 chain, __u32 pos, int hit)
{
	__u32 k = chain * NENA_MAX_LINKS + (pos & (NENA_MAX_LINKS - 1));
	struct link_stats *s = bpf_map_lookup_elem(&link_stats, &k);
	if (s) {
		s->runs++;
		if (hit)
			s->hits++;
	}
}

/* One selector: 1 if the packet matches its arguments, 0 if not. */
static __always_inline int select_one(void *ctx, const int tc, struct nena_ctx *c,
				      const struct link *l)
{
	switch (l->prog) {
	case P_SUBFLOW:
		return subflow_body(ctx, tc, c, l);
	case P_IP_PAIR:
		return ip_pair_body(ctx, tc, c, l);
	case P_SRC:
		return src_body(ctx, tc, c, l);
	case P_DST:
		return dst_body(ctx, tc, c, l);
	case P_SEQUENCE:
		return sequence_body(ctx, tc, c, l);
	case P_PACKET_TYPE:
		return packet_type_body(ctx, tc, c, l);
	}
	return 0;
}

/* select_one as a global function per hook: the verifier checks it once, on its own, instead
 * of once for every link of the loop in advance() (which would exceed its budget), and its
 * stack frame (option bytes, a flow key) does not add to the caller's. Its pointer arguments
 * may be NULL as far as the verifier knows. */
__noinline int select_xdp(struct xdp_md *ctx, struct nena_ctx *c, const struct link *l)
{
	if (!ctx || !c || !l)
		return 0;
	return select_one(ctx, 0, c, l);
}

__noinline int select_tc(struct __sk_buff *ctx, struct nena_ctx *c, const struct link *l)
{
	if (!ctx || !c || !l)
		return 0;
	return select_one(ctx, 1, c, l);
}

/* Does the actor have anything to do with a packet of these types? Each answer is implied by
 * the first test in the actor's body (actors.h), which returns at once otherwise: a skipped
 * actor is one that would have done nothing, and the tail call to it is saved. Most MPTCP
 * packets are DSS data and data ACKs, which get_connect, get_subflow and blk_subflow never
 * touch. */
static __always_inline int actor_wants(__u32 prog, __u32 t)
{
	if (prog == P_RECORD)
		return 1;
	if (t & T_MALFORMED)
		return 0;
	switch (prog) {
	case P_RATE_LIMIT:
		return !(t & (T_SYN | T_SYNACK));
	case P_SET_BACKUP:
		return (t & (T_MP_JOIN | T_PURE_ACK)) != 0;
	case P_BLK_SUBFLOW:
		return (t & T_ADD_ADDR) != 0;
	case P_ADD_SUBFLOW:
		return (t & T_PURE_ACK) && !(t & T_ADD_ADDR);
	case P_GET_CONNECT:
		return (t & T_MP_CAPABLE) != 0;
	case P_GET_SUBFLOW:
		return (t & T_MP_JOIN) != 0;
	}
	return 1;
}

/* From link `from` on: run the selectors that have to run, combining their results in c->m
 * (a selector that starts a rule always runs; an AND selector runs if m, an OR selector if
 * !m: the others cannot change m), until an actor that has to run (m set, and a packet it
 * wants). Returns its index, with its program in bits 8 and up; NENA_MAX_LINKS if none is
 * left. c->chain is the chain's slot. */
static __always_inline __u32 advance(void *ctx, const int tc, struct nena_ctx *c,
				     const struct chain *ch, __u32 from)
{
	/* few values live across the calls below (ctx, c, ch, i): they stay in the callee-saved
	 * registers instead of the stack, whose 512 bytes the actor's frame and select_*'s share */
#pragma clang loop unroll(disable)
	for (__u32 i = from; i < NENA_MAX_LINKS; i++) {
		if (i >= ch->len)
			break;
		/* the index, not a pointer stepped by clang, so the verifier sees the bound */
		__u32 k = i & (NENA_MAX_LINKS - 1);
		asm volatile("" : "+r"(k));
		const struct link *l = &ch->links[k];
		if (l->kind == KIND_ACTOR) {
			if (!c->m)
				continue;
			if (!actor_wants(l->prog, c->types)) {
				count(c->chain, i, 0); /* it ran, as far as `show` goes, and did nothing */
				continue;
			}
			return ((__u32)l->prog << 8) | i;
		}
		if (!l->new_rule && !(l->op == OP_AND && c->m) && !(l->op == OP_OR && !c->m))
			continue;
		int r = tc ? select_tc(ctx, c, l) : select_xdp(ctx, c, l);
		count(c->chain, i, r > 0);
		__u8 v = (r > 0) ^ (l->negate ? 1 : 0);
		if (l->new_rule)
			c->m = v;
		else if (l->op == OP_OR)
			c->m = c->m | v;
		else
			c->m = c->m & v;
	}
	return NENA_MAX_LINKS;
}

/* Run the actor the context points at, then the selectors after it, then tail-call the next
 * actor that has to run. Returns the verdict. */
#define LINK_STEP(NAME, TC, CTX)                                                               \
	({                                                                                     \
		struct nena_ctx c;                                                             \
		int verdict = VERDICT(TC);                                                     \
		if (ctx_load(CTX, TC, &c) == 0) {                                              \
			__u32 slot = c.chain;                                                  \
			struct chain *ch = bpf_map_lookup_elem(&chains, &slot);                \
			if (ch) {                                                              \
				__u32 pos = c.pos & (NENA_MAX_LINKS - 1);                      \
				const struct link *l = &ch->links[pos];                        \
				int r = NAME##_body(CTX, TC, &c, l);                           \
				count(slot, pos, r > 0);                                        \
				if (r == NENA_DROP)                                            \
					return DROP_VERDICT(TC);                               \
				__u32 nx = advance(CTX, TC, &c, ch, pos + 1);                  \
				if ((nx & 0xff) < NENA_MAX_LINKS) {                            \
					__u32 prog = nx >> 8;                                  \
					c.pos = nx & 0xff;                                     \
					if (ctx_store(CTX, TC, &c) == 0)                       \
						bpf_tail_call(CTX, jmp_table(TC), prog);       \
				}                                                              \
			}                                                                      \
		}                                                                              \
		verdict;                                                                       \
	})

/* One actor body, two programs: xdp_NAME (ingress) and tc_NAME (egress). */
#define NENA_LINK(NAME)                                                                        \
	SEC("xdp") int xdp_##NAME(struct xdp_md *ctx) { return LINK_STEP(NAME, 0, ctx); }      \
	SEC("tc") int tc_##NAME(struct __sk_buff *ctx) { return LINK_STEP(NAME, 1, ctx); }

#endif
