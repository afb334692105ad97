/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* The dispatcher: the only program attached to a hook. It parses the packet once (Ethernet,
 * IPv4 with options or IPv6 with extension headers, TCP, TCP options), records the window
 * scale of handshakes, fills the context, runs the leading selectors of the chain configured
 * for (interface, hook) and tail-calls the first actor that has to run. Headers are read
 * with ld() (bounds-checked; short frames and non-linear skbs go through the load helpers).
 * With tenants defined, the chain is the packet's tenant's for that hook if it has one
 * (tenant.h), else the hook's default chain.
 * Anything it does not understand passes untouched. */
#ifndef NENA_DISPATCH_H
#define NENA_DISPATCH_H

#include "chain.h"
#include "tenant.h"

static long classify_cb(__u32 i, void *arg)
{
	struct opts *o = arg;
	int k = 0, l = 0;
	if (opt_at(o, &k, &l)) {
		if (l < 0)
			o->t |= T_MALFORMED;
		return 1;
	}
	int off = o->off;
	if (k == 3 && l == 3)
		o->ws = o->b[(off + 2) & 63];
	if (k == TCPOPT_MPTCP && l >= 3) {
		__u8 sub = o->b[(off + 2) & 63] >> 4;
		o->t |= T_MPTCP;
		if (sub <= 8)
			o->t |= T_MP_CAPABLE << sub;
		if (sub == MPTCPOPT_DSS && l >= 4) {
			__u8 f = o->b[(off + 3) & 63];
			if (f & 0x01)
				o->t |= T_DATA_ACK;
			if (f & 0x04)
				o->t |= T_DSS_MAP;
			if (f & 0x10)
				o->t |= T_DATA_FIN;
		}
		if (sub == MPTCPOPT_ADD_ADDR && (o->b[(off + 2) & 63] & 1)) {
			o->t &= ~T_ADD_ADDR;
			o->t |= T_ADD_ADDR_ECHO;
		}
	}
	o->off += l;
	return 0;
}

/* A SYN or SYN/ACK: record the window scale it offers; a SYN/ACK also settles both
 * directions (RFC 7323: scaling only if both offered it). v6: a constant, see FLOW_LOOKUP. */
static __always_inline void learn_wscale(void *ctx, const int tc, const struct nena_ctx *c,
					 __u8 ws, const int v6)
{
	struct flow_key fk, rk;
	if (get_flow(ctx, tc, c, &fk))
		return;
	struct flow_state v = {.offered = ws, .eff = WS_UNKNOWN};
	if (c->tcp_flags & TCPF_ACK) {
		flow_reverse(&fk, &rk);
		struct flow_state *r = FLOW_LOOKUP(flows, v6, &rk);
		if (r && r->offered != WS_UNSEEN) {
			int both = ws != WS_NONE && r->offered != WS_NONE;
			v.eff = both ? ws : 0;
			r->eff = both ? r->offered : 0;
		}
	}
	FLOW_UPDATE(flows, v6, &fk, &v, BPF_ANY);
}

static __always_inline void learn_wscale_any(void *ctx, const int tc, const struct nena_ctx *c,
					     __u8 ws)
{
	if (c->types & T_IPV6)
		learn_wscale(ctx, tc, c, ws, 1);
	else
		learn_wscale(ctx, tc, c, ws, 0);
}

/* learn_wscale as a global function per hook, verified once: inline, its two family paths
 * would each carry the rest of the dispatcher through the verifier. */
__noinline int learn_wscale_xdp(struct xdp_md *ctx, const struct nena_ctx *c, __u32 ws)
{
	if (ctx && c)
		learn_wscale_any(ctx, 0, c, ws);
	return 0;
}

__noinline int learn_wscale_tc(struct __sk_buff *ctx, const struct nena_ctx *c, __u32 ws)
{
	if (ctx && c)
		learn_wscale_any(ctx, 1, c, ws);
	return 0;
}

static __always_inline int dispatch(void *ctx, const int tc, __u32 ifindex, int meta_room)
{
	struct nena_ctx c = {};
	__u16 proto;
	if (ld(ctx, tc, 12, &proto, 2) < 0)
		return VERDICT(tc);
	__u32 l4;
	__u32 iplen; /* bytes from the start of the IP header to the end of the TCP segment */
	__u32 nh_len;
	c.l3_off = ETH_HLEN;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr iph __attribute__((aligned(8))), *ip = &iph;
		if (ld(ctx, tc, ETH_HLEN, ip, sizeof(*ip)) < 0)
			return VERDICT(tc);
		if (ip->version != 4 || ip->ihl < 5 || ip->protocol != IPPROTO_TCP_)
			return VERDICT(tc);
		if (ip->frag_off & bpf_htons(0x3fff)) /* fragments: no whole TCP header to act on */
			return VERDICT(tc);
		nh_len = ip->ihl * 4;
		if (nh_len > 20)
			c.types |= T_IPOPTS;
		iplen = bpf_ntohs(ip->tot_len);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6h __attribute__((aligned(8))), *ip6 = &ip6h;
		if (ld(ctx, tc, ETH_HLEN, ip6, sizeof(*ip6)) < 0)
			return VERDICT(tc);
		__u8 nh = ip6->nexthdr;
		nh_len = sizeof(*ip6);
		iplen = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
		c.types |= T_IPV6;
		/* hop-by-hop, routing, destination options: skip up to 4; anything else ends */
		for (int i = 0; i < 4; i++) {
			if (nh != 0 && nh != 43 && nh != 60)
				break;
			__u8 eh[2];
			if (ld(ctx, tc, ETH_HLEN + (nh_len & 0x3ff), eh, 2) < 0)
				return VERDICT(tc);
			nh = eh[0];
			nh_len += (eh[1] + 1) * 8;
			c.types |= T_IPOPTS;
			if (nh_len > 512)
				return VERDICT(tc);
		}
		if (nh != IPPROTO_TCP_)
			return VERDICT(tc);
	} else {
		return VERDICT(tc);
	}
	l4 = ETH_HLEN + nh_len;
	if (l4 > 600)
		return VERDICT(tc);
	__u8 th[20] __attribute__((aligned(8)));
	if (ld(ctx, tc, l4, th, 20) < 0)
		return VERDICT(tc);
	__u32 doff = (th[12] >> 4) * 4;
	__u32 tidx = tc ? 1 : 0;
	if (doff < 20 || nh_len + doff > iplen || l4 + doff > pkt_len(ctx, tc)) {
		bump(CNT_MALFORMED + tidx);
		return VERDICT(tc);
	}
	c.l4_off = l4;
	c.doff = doff;
	c.pay_len = iplen - nh_len - doff;
	c.tcp_flags = th[13];
	c.hook = tc ? NENA_HOOK_TC : NENA_HOOK_XDP;
	c.magic = NENA_MAGIC;

	__u32 slot;
	if (ifindex < NENA_FAST_IFINDEX) {
		__u32 k = ifindex * 2 + c.hook;
		__u32 *v = bpf_map_lookup_elem(&hook_slots, &k);
		if (!v || *v == 0)
			return VERDICT(tc);
		slot = *v - 1;
	} else {
		struct hook_key hk = {.ifindex = ifindex, .hook = c.hook};
		__u32 *slotp = bpf_map_lookup_elem(&hooks, &hk);
		if (!slotp)
			return VERDICT(tc);
		slot = *slotp;
	}
	bump(CNT_SEEN + tidx);

	struct opts o;
	o.t = 0;
	o.ws = 0xff;
	o.off = 0;
	if (load_opts(ctx, tc, &c, &o) < 0) {
		o.t |= T_MALFORMED;
	} else if (o.olen > 0) {
		o.off = walk_start(&o, 0); /* a SYN's window scale never follows the timestamps' NOPs here */
		bpf_loop(OPT_MAX, classify_cb, &o, 0);
	}
	c.types |= o.t;
	__u8 ws = o.ws;
	if (c.types & T_MALFORMED)
		bump(CNT_MALFORMED + tidx);

	__u8 f = c.tcp_flags;
	if ((f & TCPF_SYN) && !(f & TCPF_ACK))
		c.types |= T_SYN;
	if ((f & TCPF_SYN) && (f & TCPF_ACK))
		c.types |= T_SYNACK;
	if (f & TCPF_FIN)
		c.types |= T_FIN;
	if (f & TCPF_RST)
		c.types |= T_RST;
	if (c.pay_len)
		c.types |= T_DATA;
	else if ((f & TCPF_ACK) && !(f & (TCPF_SYN | TCPF_FIN | TCPF_RST)))
		c.types |= T_PURE_ACK;

	if ((f & TCPF_SYN) && !(c.types & T_MALFORMED)) {
		if (tc)
			learn_wscale_tc(ctx, &c, ws);
		else
			learn_wscale_xdp(ctx, &c, ws);
	}

	/* a tenant's own chain for this hook, if the packet has a tenant and it has one */
	slot = tenant_slot(ctx, tc, &c, ifindex, slot);
	if (slot >= NENA_MAX_CHAINS)
		return VERDICT(tc);
	struct chain *ch = bpf_map_lookup_elem(&chains, &slot);
	if (!ch)
		return VERDICT(tc);
	c.m = 1;
	c.chain = slot;
	__u32 first = advance(ctx, tc, &c, ch, 0);
	if ((first & 0xff) >= NENA_MAX_LINKS)
		return VERDICT(tc);
	__u32 prog = first >> 8;
	c.pos = first & 0xff;
	if (!tc) {
		/* room for the context in front of the packet (already there if an earlier run of
		 * this frame, e.g. BPF_PROG_TEST_RUN with repeat, made it) */
		if (!meta_room && bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct nena_ctx)))
			return VERDICT(tc);
	}
	if (ctx_store(ctx, tc, &c))
		return VERDICT(tc);
	bpf_tail_call(ctx, jmp_table(tc), prog);
	return VERDICT(tc);
}

SEC("xdp")
int xdp_nena(struct xdp_md *ctx)
{
	void *meta = (void *)(long)ctx->data_meta;
	void *data = (void *)(long)ctx->data;
	int room = meta + sizeof(struct nena_ctx) <= data;
	return dispatch(ctx, 0, ctx->ingress_ifindex, room);
}

SEC("tc")
int tc_nena(struct __sk_buff *ctx)
{
	return dispatch(ctx, 1, ctx->ifindex, 0);
}

#endif
