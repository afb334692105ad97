/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* Actors (seed 003, Table II), for MPTCP v1 (RFC 8684). Each returns 1 if it acted. A packet
 * whose options did not parse (T_MALFORMED) is never changed. */
#ifndef NENA_ACTORS_H
#define NENA_ACTORS_H

#include "chain.h"

/* rate_limit: cap the receive window advertised in the ACKs of a subflow, so that its sender
 * keeps at most `window` bytes in flight. The wire value is scaled by the shift the sender of
 * this ACK offered in its SYN (used only if both SYNs offered window scaling, RFC 7323);
 * a subflow whose handshake was not seen is left alone, its scale being unknown. */
static __always_inline int rate_limit_fam(void *ctx, const int tc, struct nena_ctx *c,
					   const struct link *l, const int v6)
{
	if ((c->types & T_MALFORMED) || !(c->tcp_flags & TCPF_ACK) || (c->tcp_flags & TCPF_SYN))
		return 0;
	struct flow_key fk, rk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	struct flow_state *mine = FLOW_LOOKUP(flows, v6, &fk);
	if (!mine || mine->offered == WS_UNSEEN)
		return 0;
	__u32 shift = mine->eff;
	if (shift == WS_UNKNOWN) { /* only this side's SYN seen (so far) */
		flow_reverse(&fk, &rk);
		struct flow_state *theirs = FLOW_LOOKUP(flows, v6, &rk);
		shift = 0;
		if (mine->offered != WS_NONE && !(theirs && theirs->offered == WS_NONE))
			shift = mine->offered;
	}
	if (shift > 14)
		shift = 14;
	/* the nearest value the scale can express (a rate target is met best that way) */
	__u32 cap = (l->a.rl.window + ((1u << shift) >> 1)) >> shift;
	if (cap == 0)
		cap = 1;
	if (cap > 0xffff)
		return 0;
	__u16 w;
	if (ld(ctx, tc, c->l4_off + 14, &w, 2) < 0)
		return 0;
	if (bpf_ntohs(w) <= cap)
		return 0;
	__u16 nw = bpf_htons(cap);
	if (st(ctx, tc, c->l4_off + 14, &nw, 2) < 0)
		return 0;
	tcp_csum_apply(ctx, tc, c, diff16(w, nw), 0);
	return 1;
}
FAMILY_SPLIT(rate_limit)

/* The B flag of an MP_JOIN SYN or SYN/ACK, set in place: the subflow is born (not) backup. */
static __always_inline int join_backup(void *ctx, const int tc, struct nena_ctx *c, __u8 b)
{
	struct opts o;
	int len = 0;
	int off = find_mptcp(ctx, tc, c, &o, MPTCPOPT_MP_JOIN, &len);
	if (off < 0 || (len != 12 && len != 16))
		return 0;
	__u8 old = o.b[(off + 2) & 63];
	__u8 nb = (old & ~1) | b;
	if (nb == old)
		return 0;
	if (st(ctx, tc, c->l4_off + 20 + off + 2, &nb, 1) < 0)
		return 0;
	int odd = (off + 2) & 1;
	tcp_csum_apply(ctx, tc, c, diff8(old, nb, odd), 0);
	return 1;
}

/* set_backup: on an MP_JOIN SYN or SYN/ACK, set the B flag in place (the subflow is born
 * backup, RFC 8684 3.2); on pure ACKs, add MP_PRIO (kind 30, length 3, subtype 5, B flag)
 * + NOP, `repeat` times per subflow and value, as the kernel itself sends MP_PRIO. */
static __always_inline int set_backup_fam(void *ctx, const int tc, struct nena_ctx *c,
					   const struct link *l, const int v6)
{
	if (c->types & T_MALFORMED)
		return 0;
	if ((c->types & T_MP_JOIN) && (c->types & (T_SYN | T_SYNACK)))
		return join_backup(ctx, tc, c, l->a.sb.backup ? 1 : 0);
	if (!(c->types & T_PURE_ACK) || (c->types & T_MP_PRIO))
		return 0;
	struct flow_key fk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	__u8 b = l->a.sb.backup ? 1 : 0;
	__u8 repeat = l->a.sb.repeat ? l->a.sb.repeat : 1;
	/* the flow's entry, which the dispatcher made at its SYN (else one is made here) */
	struct flow_state *fs = FLOW_LOOKUP(flows, v6, &fk);
	if (fs && fs->backup == b && fs->sent >= repeat)
		return 0;
	__u8 opt[32] __attribute__((aligned(8))) = {TCPOPT_MPTCP, 3, (MPTCPOPT_MP_PRIO << 4) | b, 1};
	if (insert_opt(ctx, tc, c, opt, 4))
		return 0;
	c->types |= T_MP_PRIO | T_MPTCP;
	if (fs) {
		fs->sent = fs->backup == b ? fs->sent + 1 : 1;
		fs->backup = b;
	} else {
		struct flow_state ns = {.offered = WS_UNSEEN, .eff = WS_UNKNOWN, .backup = b, .sent = 1};
		FLOW_UPDATE(flows, v6, &fk, &ns, BPF_NOEXIST);
	}
	return 1;
}
FAMILY_SPLIT(set_backup)

/* 0xff if byte i lies inside an option of length len, else 0 (no branch) */
static __always_inline __u8 in_opt(int i, int len)
{
	return (__u8)((i - len) >> 31);
}

/* ADD_ADDR v1 announcements (E = 0) carry a truncated HMAC: 16/18 (IPv4, +port), 28/30 (IPv6) */
static __always_inline int add_addr_len_ok(int len)
{
	return len == 16 || len == 18 || len == 28 || len == 30;
}

/* Overwrite the len (16, 18, 28 or 30: an ADD_ADDR) bytes at packet offset `at` with NOPs,
 * in place (a store helper costs more); -1, and nothing written, if they do not all lie in
 * the linear data. Every bound is checked before the first write. */
static __always_inline int nops_at(void *ctx, const int tc, __u32 at, int len)
{
	const __u64 nop8 = 0x0101010101010101ULL;
	asm volatile("%0 &= 0x3ff" : "+r"(at)); /* bound for the verifier */
	__u8 *p = pkt_begin(ctx, tc) + at, *end = pkt_end(ctx, tc);
	if (len >= 28) {
		if (p + 28 > end)
			return -1;
		if (len == 30) {
			if (p + 30 > end)
				return -1;
			*(__u16 *)(p + 28) = (__u16)nop8;
		}
		*(__u64 *)(p + 16) = nop8;
		*(__u32 *)(p + 24) = (__u32)nop8;
	} else {
		if (p + 16 > end)
			return -1;
		if (len == 18) {
			if (p + 18 > end)
				return -1;
			*(__u16 *)(p + 16) = (__u16)nop8;
		}
	}
	*(__u64 *)p = nop8;
	*(__u64 *)(p + 8) = nop8;
	return 0;
}

/* blk_subflow's bookkeeping: keep the announcement at o->b[off] (len bytes) in k, in the slot
 * of its address id (else a free one, else the first), and return what overwriting it with
 * NOPs adds to the TCP checksum. A global function: the verifier checks it once, on its own,
 * instead of once for every path of the actor that reaches it. */
__noinline __u32 keep_announcement(struct kept *k, const struct opts *o, int off, int len)
{
	if (!k || !o)
		return 0;
	const __u8 *buf = o->b;
	__u8 id = buf[(off + 3) & 63];
	int s = -1;
	for (int i = 0; i < KEPT_SLOTS; i++) {
		if (k->slot[i].len && k->slot[i].id == id) {
			s = i;
			break;
		}
	}
	if (s < 0)
		for (int i = 0; i < KEPT_SLOTS; i++) {
			if (!k->slot[i].len) {
				s = i;
				break;
			}
		}
	if (s < 0)
		s = 0; /* all full: the oldest slot goes */
	struct kept_slot *ks = &k->slot[s & (KEPT_SLOTS - 1)];
	/* one byte loop without data-dependent branches (mask = 0xff inside the option): the
	 * option kept, and the checksum difference of NOPs in its place (same length, so only
	 * the checksum changes) */
	__u32 diff = 0;
	for (int i = 0; i < 32; i++) {
		__u8 b = buf[(off + i) & 63], mask = in_opt(i, len);
		ks->opt[i] = b & mask;
		int odd = (off + i) & 1; /* options start at TCP offset 20: even */
		diff += diff8(b, 1, odd) & -(__u32)(mask & 1);
	}
	ks->len = len;
	ks->id = id;
	ks->reannounced = 0;
	if (ks->blocked < 255)
		ks->blocked++;
	return diff;
}

/* blk_subflow: overwrite an ADD_ADDR announcement with NOPs (or drop the bare ACK that only
 * carries it, see below), so no subflow is created to that address, and keep it (per subflow
 * and address id; a retransmission updates the same slot, and is blocked again: with no echo
 * the announcer retransmits). Echoes (E = 1) pass: they announce nothing. */
static __always_inline int blk_subflow_fam(void *ctx, const int tc, struct nena_ctx *c,
					    const struct link *l, const int v6)
{
	if (!(c->types & T_ADD_ADDR) || (c->types & T_MALFORMED))
		return 0;
	struct opts o;
	int len = 0;
	__u8 *buf = o.b;
	int off = find_mptcp(ctx, tc, c, &o, MPTCPOPT_ADD_ADDR, &len);
	if (off < 0 || (buf[(off + 2) & 63] & 1) || !add_addr_len_ok(len))
		return 0;
	struct flow_key fk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	/* Linux sends an announcement on a pure ACK of its own, without DSS. Such an ACK with
	 * NOPs instead would carry no MPTCP option at all, and a peer that is not yet fully
	 * established (the announcement often comes right after the handshake) falls back to
	 * TCP on it (RFC 8684 3.1). So that ACK, which carries nothing else, is dropped; any
	 * other packet keeps going with NOPs in place of the option. */
	int drop = (c->types & T_PURE_ACK) &&
		   !(c->types & (T_MP_CAPABLE | T_MP_JOIN | T_DSS | T_RM_ADDR | T_MP_PRIO |
				 T_MP_FAIL | T_MP_FASTCLOSE | T_MP_TCPRST | T_ADD_ADDR_ECHO));
	/* looked up first: an update of an LRU map takes a free element before it finds the key
	 * already there (and gives it back), which costs more than the lookup */
	struct kept zero = {};
	struct kept *k = FLOW_LOOKUP(kept, v6, &fk);
	if (!k) {
		FLOW_UPDATE(kept, v6, &fk, &zero, BPF_NOEXIST);
		k = FLOW_LOOKUP(kept, v6, &fk);
		if (!k)
			return 0;
	}
	__u32 diff = keep_announcement(k, &o, off, len);
	if (drop)
		return NENA_DROP;
	__u32 at = c->l4_off + 20 + off;
	if (nops_at(ctx, tc, at, len) < 0) { /* not in the linear data: the store helper */
		__u8 nops[32];
		for (int i = 0; i < 32; i++)
			nops[i] = 1;
		__u32 n = len & 31;
		if (n < 16 || st(ctx, tc, at, nops, n) < 0)
			return 0;
	}
	tcp_csum_apply(ctx, tc, c, diff, 0);
	c->types &= ~T_ADD_ADDR;
	return 1;
}
FAMILY_SPLIT(blk_subflow)

/* add_subflow: re-announce a kept ADD_ADDR (HMAC unchanged, so the peer accepts it) on a pure
 * ACK of the same subflow, up to 3 times per kept address. Put it on the hook blk_subflow ran. */
static __always_inline int add_subflow_fam(void *ctx, const int tc, struct nena_ctx *c,
					    const struct link *l, const int v6)
{
	if (!(c->types & T_PURE_ACK) || (c->types & (T_MALFORMED | T_ADD_ADDR)))
		return 0;
	struct flow_key fk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	struct kept *k = FLOW_LOOKUP(kept, v6, &fk);
	if (!k)
		return 0;
	int s = -1;
	for (int i = 0; i < KEPT_SLOTS; i++) {
		if (k->slot[i].len && k->slot[i].reannounced < 3) {
			s = i;
			break;
		}
	}
	if (s < 0)
		return 0;
	struct kept_slot *ks = &k->slot[s & (KEPT_SLOTS - 1)];
	__u8 opt[32] __attribute__((aligned(8)));
	__u32 len = ks->len;
	if (!add_addr_len_ok(len))
		return 0;
	for (int i = 0; i < 32; i++)
		opt[i] = (ks->opt[i] & in_opt(i, len)) | (1 & ~in_opt(i, len)); /* NOP padding */
	if (insert_opt(ctx, tc, c, opt, (len + 3) & ~3u))
		return 0;
	ks->reannounced++;
	c->types |= T_ADD_ADDR | T_MPTCP;
	return 1;
}
FAMILY_SPLIT(add_subflow)

/* A zeroed event of `type` in the ring buffer, its header filled in; NULL if the ring is full. */
static __always_inline struct event *ev_new(void *ctx, const int tc, const struct nena_ctx *c,
					    const struct flow_key *fk, __u32 type)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return NULL;
	__builtin_memset(e, 0, sizeof(*e));
	e->ifindex = tc ? ((struct __sk_buff *)ctx)->ifindex : ((struct xdp_md *)ctx)->ingress_ifindex;
	e->ts_ns = bpf_ktime_get_ns();
	e->flow = *fk;
	e->hook = c->hook;
	e->type = type;
	return e;
}

static __always_inline __u8 stage_of(const struct nena_ctx *c)
{
	if (c->types & T_SYN)
		return 1;
	if (c->types & T_SYNACK)
		return 2;
	return 3;
}

/* get_connect: report the keys of MP_CAPABLE (v1: none in the SYN, the sender's key in the
 * SYN/ACK, both in the third ACK). Tokens and IDSNs (SHA-256) are derived in user space. */
static __always_inline int get_connect_body(void *ctx, const int tc, struct nena_ctx *c,
					    const struct link *l)
{
	if (!(c->types & T_MP_CAPABLE) || (c->types & T_MALFORMED))
		return 0;
	struct opts o;
	int len = 0;
	__u8 *buf = o.b;
	int off = find_mptcp(ctx, tc, c, &o, MPTCPOPT_MP_CAPABLE, &len);
	if (off < 0 || len < 4)
		return 0;
	struct flow_key fk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	struct event *e = ev_new(ctx, tc, c, &fk, EV_CONNECT);
	if (!e)
		return 0;
	e->stage = stage_of(c);
	e->version = buf[(off + 2) & 63] & 0x0f;
	e->flags = buf[(off + 3) & 63];
	if (len >= 12) {
		for (int i = 0; i < 8; i++)
			e->key_a[i] = buf[(off + 4 + i) & 63];
		e->nkeys = 1;
	}
	if (len >= 20) {
		for (int i = 0; i < 8; i++)
			e->key_b[i] = buf[(off + 12 + i) & 63];
		e->nkeys = 2;
	}
	bpf_ringbuf_submit(e, 0);
	return 1;
}

/* get_subflow: report MP_JOIN: token, nonce, address id and backup flag of the SYN; nonce and
 * truncated HMAC of the SYN/ACK; the third ACK as a stage. */
static __always_inline int get_subflow_body(void *ctx, const int tc, struct nena_ctx *c,
					    const struct link *l)
{
	if (!(c->types & T_MP_JOIN) || (c->types & T_MALFORMED))
		return 0;
	struct opts o;
	int len = 0;
	__u8 *buf = o.b;
	int off = find_mptcp(ctx, tc, c, &o, MPTCPOPT_MP_JOIN, &len);
	if (off < 0 || len < 3)
		return 0;
	struct flow_key fk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	struct event *e = ev_new(ctx, tc, c, &fk, EV_SUBFLOW);
	if (!e)
		return 0;
	e->stage = stage_of(c);
	e->flags = buf[(off + 2) & 63] & 0x0f;
	if (len >= 4)
		e->addr_id = buf[(off + 3) & 63];
	if (e->stage == 1 && len == 12) { /* token, nonce */
		for (int i = 0; i < 8; i++)
			e->key_a[i] = buf[(off + 4 + i) & 63];
		e->nkeys = 1;
	} else if (e->stage == 2 && len == 16) { /* HMAC(8), nonce */
		for (int i = 0; i < 8; i++) {
			e->key_b[i] = buf[(off + 4 + i) & 63];
			e->key_a[i] = i < 4 ? 0 : buf[(off + 8 + i) & 63];
		}
	}
	bpf_ringbuf_submit(e, 0);
	return 1;
}

/* record: per-subflow packets, bytes, flow size (payload) and RTT from timestamps (TSval sent
 * at egress, echoed TSecr seen at ingress: put `record` on both hooks). FIN/RST report. */
static __always_inline int record_fam(void *ctx, const int tc, struct nena_ctx *c,
				       const struct link *l, const int v6)
{
	struct flow_key fk;
	if (get_flow(ctx, tc, c, &fk))
		return 0;
	/* first/last seen: the coarse clock (a few ns; jiffy resolution) is enough; the RTT
	 * samples below read the precise one, once per round trip */
	__u64 now = bpf_ktime_get_coarse_ns();
	struct metrics *m = FLOW_LOOKUP(metrics, v6, &fk);
	if (!m) {
		struct metrics zero = {.first_ns = now};
		FLOW_UPDATE(metrics, v6, &fk, &zero, BPF_NOEXIST);
		m = FLOW_LOOKUP(metrics, v6, &fk);
		if (!m)
			return 0;
	}
	__sync_fetch_and_add(&m->pkts, 1);
	__sync_fetch_and_add(&m->bytes, c->l4_off - c->l3_off + c->doff + c->pay_len);
	if (c->pay_len)
		__sync_fetch_and_add(&m->payload, c->pay_len);
	m->last_ns = now;
	/* RTT: a TSval sent at egress, echoed in a TSecr seen at ingress. One sample per round
	 * trip: egress starts it in its own entry and mirrors it into the entry of the other
	 * direction, so that an ACK coming in needs no second lookup; the ACK that completes it
	 * writes the RTT into the egress entry. Options are walked only when starting or ending
	 * a sample. A sample that never completes is restarted after a second. */
	if (!(c->types & T_MALFORMED) && c->doff > 20 &&
	    (tc ? (!m->ts_ns || now > m->ts_ns + 1000000000ULL)
		: (m->ts_ns && (c->tcp_flags & TCPF_ACK)))) {
		struct opts op;
		int len = 0;
		int off = load_opts(ctx, tc, c, &op) > 0 ? find_opt(&op, 8, -1, &len) : -1;
		if (off >= 0 && len == 10) {
			__u8 *buf = op.b;
			__u32 tsval = (__u32)be_n(buf, off + 2, 4);
			__u32 tsecr = (__u32)be_n(buf, off + 6, 4);
			__u64 precise = bpf_ktime_get_ns();
			struct flow_key rk;
			flow_reverse(&fk, &rk);
			if (tc) {
				m->ts_val = tsval;
				m->ts_ns = precise;
				struct metrics rz = {.first_ns = now};
				FLOW_UPDATE(metrics, v6, &rk, &rz, BPF_NOEXIST);
				struct metrics *r = FLOW_LOOKUP(metrics, v6, &rk);
				if (r) {
					r->ts_val = tsval;
					r->ts_ns = precise;
				}
			} else if ((__s32)(tsecr - m->ts_val) >= 0) {
				__u32 rtt = (precise - m->ts_ns) / 1000;
				m->ts_ns = 0;
				struct metrics *o = FLOW_LOOKUP(metrics, v6, &rk);
				if (o) {
					o->rtt_us = rtt;
					o->srtt_us = o->samples ? (o->srtt_us * 7 + rtt) / 8 : rtt;
					o->samples++;
					o->ts_ns = 0;
				}
			}
		}
	}
	if (c->types & (T_FIN | T_RST)) {
		struct event *e = ev_new(ctx, tc, c, &fk, EV_RECORD);
		if (e) {
			e->stage = (c->types & T_RST) ? 2 : 1;
			e->m = *m;
			bpf_ringbuf_submit(e, 0);
		}
	}
	return 1;
}
FAMILY_SPLIT(record)

/* drop: the packet goes no further (a tenant kept off a path: its joins never leave). */
static __always_inline int drop_body(void *ctx, const int tc, struct nena_ctx *c,
				     const struct link *l)
{
	return NENA_DROP;
}

NENA_LINK(rate_limit)
NENA_LINK(set_backup)
NENA_LINK(blk_subflow)
NENA_LINK(add_subflow)
NENA_LINK(get_connect)
NENA_LINK(get_subflow)
NENA_LINK(record)
NENA_LINK(drop)

#endif
