/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* What the lab's attackers (tamper.bpf.c, forge.bpf.c) share: the parsing of a TCP segment
 * of an Ethernet frame at TC, and the XOR of one payload byte with its checksum fixed. */
#ifndef NENA_ATTACK_SEGMENT_H
#define NENA_ATTACK_SEGMENT_H

#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_OK 0
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define PROTO_TCP 6
#define TCPF_SYN 0x02

/* One TCP segment: its TCP header and where it lies, its addresses (IPv4 in the first 4
 * bytes). */
struct segment {
	struct tcphdr th;
	__u32 ip_hl;  /* IP header length */
	__u32 total;  /* IP packet length */
	__u32 tcp_at; /* offset of the TCP header in the frame */
	__u8 v6;
	__u8 saddr[16] __attribute__((aligned(8)));
	__u8 daddr[16] __attribute__((aligned(8)));
};

/* Reads the segment of `skb` into `s`: 0 for a TCP segment over IPv4 (not a fragment) or
 * IPv6 (no extension headers) with an IP header of 20..60 bytes, -1 for anything else. */
static __always_inline int parse_segment(struct __sk_buff *skb, struct segment *s)
{
	__u16 proto;

	if (bpf_skb_load_bytes(skb, 12, &proto, 2))
		return -1;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) || ip.protocol != PROTO_TCP)
			return -1;
		if (ip.frag_off & bpf_htons(0x3fff))
			return -1; /* fragments: not ours */
		s->ip_hl = ip.ihl * 4;
		s->total = bpf_ntohs(ip.tot_len);
		__builtin_memcpy(s->saddr, &ip.saddr, 4);
		__builtin_memcpy(s->daddr, &ip.daddr, 4);
		s->v6 = 0;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)) || ip6.nexthdr != PROTO_TCP)
			return -1; /* extension headers: not handled */
		s->ip_hl = sizeof(ip6);
		s->total = sizeof(ip6) + bpf_ntohs(ip6.payload_len);
		__builtin_memcpy(s->saddr, &ip6.saddr, 16);
		__builtin_memcpy(s->daddr, &ip6.daddr, 16);
		s->v6 = 1;
	} else {
		return -1;
	}
	if (s->ip_hl < 20 || s->ip_hl > 60)
		return -1;
	s->tcp_at = ETH_HLEN + s->ip_hl;
	if (bpf_skb_load_bytes(skb, s->tcp_at, &s->th, sizeof(s->th)))
		return -1;
	return 0;
}

/* XORs payload byte `k` with `mask` (`payload_at` is where the payload starts, an even offset
 * from the TCP header, so the checksum's 16-bit words pair bytes k & ~1 and k | 1) and fixes
 * the TCP checksum at `csum_at`; the byte before and after in `old_b`, `new_b`. A last byte
 * without a partner (odd payload length) is summed with a zero byte, as TCP's checksum pads
 * it. */
static __always_inline int xor_payload_byte(struct __sk_buff *skb, __u32 payload_at, __u32 k,
					    __u32 payload, __u8 mask, __u32 csum_at,
					    __u8 *old_b, __u8 *new_b)
{
	__u8 b0 = 0, b1 = 0, old, nw;
	__u16 old_w, new_w;
	__u32 first = k & ~1u;

	if (bpf_skb_load_bytes(skb, payload_at + first, &b0, 1))
		return -1;
	if (first + 1 < payload && bpf_skb_load_bytes(skb, payload_at + first + 1, &b1, 1))
		return -1;
	old = (k & 1) ? b1 : b0;
	nw = old ^ mask;
	/* the checksum's 16-bit word as it lies in the packet, before and after */
	__u8 ow[2] = {b0, b1};
	__u8 nwb[2] = {(k & 1) ? b0 : nw, (k & 1) ? nw : b1};
	__builtin_memcpy(&old_w, ow, 2);
	__builtin_memcpy(&new_w, nwb, 2);
	*old_b = old;
	*new_b = nw;
	/* no checksum flag on the store: the field update below keeps the packet's sum (and so a
	 * CHECKSUM_COMPLETE skb->csum) unchanged; with CHECKSUM_PARTIAL the helper leaves the
	 * field alone, as the sum is computed later over the new bytes */
	if (bpf_skb_store_bytes(skb, payload_at + k, &nw, 1, 0))
		return -1;
	return bpf_l4_csum_replace(skb, csum_at, old_w, new_w, 2);
}

#endif
