/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* Selectors (seed 003, Table I). Each returns 1 if the packet matches its arguments, 0 if
 * not; chain.h runs them inline and combines the results (AND / OR / negate). They never
 * change a packet. */
#ifndef NENA_SELECTORS_H
#define NENA_SELECTORS_H

#include "common.h"

/* The first n (4 or 16) bytes of two addresses of a struct flow_key (8-byte aligned) are
 * equal: compared a word at a time. */
static __always_inline int addr_eq(const __u8 *a, const __u8 *b, int n)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;
	if (x[0] != y[0])
		return 0;
	return n == 4 || (x[1] == y[1] && x[2] == y[2] && x[3] == y[3]);
}

static __always_inline int prefix_match(const __u8 *addr, const struct a_prefix *p)
{
	int plen = p->plen;
	for (int i = 0; i < 16; i++) {
		int bits = plen - i * 8;
		if (bits <= 0)
			break;
		__u8 mask = bits >= 8 ? 0xff : (__u8)(0xff << (8 - bits));
		if ((addr[i] ^ p->addr[i]) & mask)
			return 0;
	}
	return 1;
}

/* subflow: the TCP 4-tuple, in either direction (a subflow carries both). Port 0 = any. */
static __always_inline int subflow_body(void *ctx, const int tc, struct nena_ctx *c,
					const struct link *l)
{
	struct flow_key fk;
	const struct flow_key *a = &l->a.flow;
	if (get_flow(ctx, tc, c, &fk) || fk.family != a->family)
		return 0;
	int n = fk.family == 4 ? 4 : 16;
	if (addr_eq(fk.saddr, a->saddr, n) && addr_eq(fk.daddr, a->daddr, n) &&
	    (!a->sport || a->sport == fk.sport) && (!a->dport || a->dport == fk.dport))
		return 1;
	if (addr_eq(fk.saddr, a->daddr, n) && addr_eq(fk.daddr, a->saddr, n) &&
	    (!a->sport || a->sport == fk.dport) && (!a->dport || a->dport == fk.sport))
		return 1;
	return 0;
}

/* ip_pair: source and destination address, in this direction. */
static __always_inline int ip_pair_body(void *ctx, const int tc, struct nena_ctx *c,
					const struct link *l)
{
	struct flow_key fk;
	const struct flow_key *a = &l->a.flow;
	if (get_flow(ctx, tc, c, &fk) || fk.family != a->family)
		return 0;
	int n = fk.family == 4 ? 4 : 16;
	return addr_eq(fk.saddr, a->saddr, n) && addr_eq(fk.daddr, a->daddr, n);
}

static __always_inline int prefix_body(void *ctx, const int tc, struct nena_ctx *c,
				       const struct link *l, int dst)
{
	__u8 addr[16] __attribute__((aligned(8))) = {};
	const struct a_prefix *p = &l->a.prefix;
	int v6 = (c->types & T_IPV6) ? 1 : 0;
	if ((v6 ? 6 : 4) != p->family)
		return 0;
	__u32 off = c->l3_off + (v6 ? (dst ? 24 : 8) : (dst ? 16 : 12));
	if ((v6 ? ld(ctx, tc, off, addr, 16) : ld(ctx, tc, off, addr, 4)) < 0)
		return 0;
	return prefix_match(addr, p);
}

/* src / dst: one address or prefix. */
static __always_inline int src_body(void *ctx, const int tc, struct nena_ctx *c,
				    const struct link *l)
{
	return prefix_body(ctx, tc, c, l, 0);
}

static __always_inline int dst_body(void *ctx, const int tc, struct nena_ctx *c,
				    const struct link *l)
{
	return prefix_body(ctx, tc, c, l, 1);
}

/* Is v in [lo, hi], modulo 2^bits (so a range may wrap)? */
static __always_inline int in_range(__u64 v, __u64 lo, __u64 hi, int bits32)
{
	if (bits32)
		return (__u32)((__u32)v - (__u32)lo) <= (__u32)((__u32)hi - (__u32)lo);
	return v - lo <= hi - lo;
}

static __always_inline __u64 be_n(const __u8 *b, int off, int n)
{
	__u64 v = 0;
	for (int i = 0; i < 8; i++)
		if (i < n)
			v = (v << 8) | b[(off + i) & 63];
	return v;
}

/* sequence: data sequence number / data ACK (from DSS, 4 or 8 bytes; a 4-byte value is
 * compared with the low 32 bits of the range) or subflow sequence / ACK number. */
static __always_inline int sequence_body(void *ctx, const int tc, struct nena_ctx *c,
					 const struct link *l)
{
	const struct a_sequence *s = &l->a.seq;
	if (s->what == SEQ_SUBFLOW_SEQ || s->what == SEQ_SUBFLOW_ACK) {
		__u32 v;
		if (s->what == SEQ_SUBFLOW_ACK && !(c->tcp_flags & TCPF_ACK))
			return 0;
		if (ld(ctx, tc, c->l4_off + (s->what == SEQ_SUBFLOW_SEQ ? 4 : 8), &v, 4) < 0)
			return 0;
		return in_range(bpf_ntohl(v), s->lo, s->hi, 1);
	}
	if (!(c->types & T_DSS))
		return 0;
	struct opts o;
	int len = 0;
	__u8 *buf = o.b;
	int off = find_mptcp(ctx, tc, c, &o, MPTCPOPT_DSS, &len);
	if (off < 0 || len < 4)
		return 0;
	__u8 f = buf[(off + 3) & 63];
	int p = off + 4;
	int ack_len = (f & 0x01) ? ((f & 0x02) ? 8 : 4) : 0;
	if (s->what == SEQ_DATA_ACK) {
		if (!ack_len || p + ack_len > off + len)
			return 0;
		return in_range(be_n(buf, p, ack_len), s->lo, s->hi, ack_len == 4);
	}
	if (!(f & 0x04))
		return 0;
	p += ack_len;
	int dsn_len = (f & 0x08) ? 8 : 4;
	if (p + dsn_len > off + len)
		return 0;
	return in_range(be_n(buf, p, dsn_len), s->lo, s->hi, dsn_len == 4);
}

/* packet_type: the dispatcher's classification (SYN, MP_CAPABLE, MP_JOIN, DATA_ACK, ...). */
static __always_inline int packet_type_body(void *ctx, const int tc, struct nena_ctx *c,
					    const struct link *l)
{
	const struct a_packet_type *p = &l->a.pt;
	__u32 t = c->types;
	if ((t & p->all) != p->all)
		return 0;
	if (p->any && !(t & p->any))
		return 0;
	return (t & p->none) == 0;
}

#endif
