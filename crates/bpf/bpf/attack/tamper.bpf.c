/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* tamper: an active attacker on one path, for tests and demonstrations (`nena lab tamper`).
 *
 * At TC (clsact, direct action) on one interface, it watches the first TCP flow to or from a
 * configured port whose SYN it sees, lets the first `skip` payload bytes of that flow pass,
 * and flips one byte (XOR `mask`) of the first data segment that starts at or after that
 * point, at `offset` into the segment (or its last byte, if shorter). The TCP checksum is
 * fixed with bpf_l4_csum_replace, so the receiver's TCP accepts the segment and the change
 * reaches the application's protocol. It fires once; a retransmission that carries the
 * altered byte again is altered the same way, so the receiver never gets a clean copy.
 * What it did is in the map `tamper`, which user space reads (the map has no pin: it lives
 * as long as the filter, which `nena lab tamper --remove` or deleting the namespace ends).
 *
 * MPTCP's DSS checksum (net.mptcp.checksum_enabled, off by default) would catch the change
 * at the MPTCP level; with it off, only the protocol above MPTCP can.
 */
#include "segment.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Configuration (written by user space before attaching) and what happened. */
struct tamper {
	/* configuration */
	__u16 port;      /* the TCP port to match, host order */
	__u8 match_dst;  /* 1: destination port (toward the server), 0: source port */
	__u8 mask;       /* XOR mask of the altered byte, not 0 */
	__u32 skip;      /* payload bytes of the flow that pass untouched first */
	__u32 offset;    /* which byte of the chosen segment */
	__u32 owns_clsact; /* user space only: it created the clsact qdisc */
	/* the flow being watched */
	__u8 have_flow;
	__u8 v6;
	__u16 sport, dport; /* network order */
	__u8 saddr[16] __attribute__((aligned(8)));
	__u8 daddr[16] __attribute__((aligned(8)));
	__u32 isn; /* sequence number of its SYN */
	/* what was done */
	__u32 fired;      /* 0; 2 while one CPU (which won it atomically) alters; then 1 */
	__u32 target_seq; /* sequence number of the altered byte */
	__u32 rel;        /* its offset from the flow's first payload byte */
	__u64 altered;    /* segments altered: 1, plus retransmissions */
	__u64 seen;       /* data segments of the flow seen */
	__u8 old_byte, new_byte;
	__u8 pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tamper);
} tamper SEC(".maps");

/* Two 16-byte addresses are equal. */
static __always_inline int same16(const __u8 *a, const __u8 *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	return x[0] == y[0] && x[1] == y[1];
}

SEC("tc")
int tc_tamper(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct tamper *t = bpf_map_lookup_elem(&tamper, &zero);
	struct segment s = {};

	if (!t || !t->mask)
		return TC_ACT_OK;
	if (parse_segment(skb, &s))
		return TC_ACT_OK;
	struct tcphdr th = s.th;
	__u32 ip_hl = s.ip_hl, total = s.total, tcp_at = s.tcp_at;
	__u8 v6 = s.v6;
	__u16 port = t->match_dst ? th.dest : th.source;
	if (bpf_ntohs(port) != t->port)
		return TC_ACT_OK;
	__u32 seq = bpf_ntohl(th.seq);
	__u8 flags = ((__u8 *)&th)[13];

	if (flags & TCPF_SYN) {
		/* the flow to watch: the first one whose SYN (toward the server) or SYN/ACK (toward
		 * the client) passes; a repeated one resets its sequence origin */
		if (!t->have_flow || (t->sport == th.source && t->dport == th.dest)) {
			t->have_flow = 1;
			t->v6 = v6;
			t->sport = th.source;
			t->dport = th.dest;
			__builtin_memcpy(t->saddr, s.saddr, 16);
			__builtin_memcpy(t->daddr, s.daddr, 16);
			t->isn = seq;
		}
		return TC_ACT_OK;
	}
	if (!t->have_flow || t->v6 != v6 || t->sport != th.source || t->dport != th.dest ||
	    !same16(t->saddr, s.saddr) || !same16(t->daddr, s.daddr))
		return TC_ACT_OK;

	__u32 doff = th.doff * 4;
	if (doff < 20 || total <= ip_hl + doff)
		return TC_ACT_OK; /* no payload */
	__u32 payload = total - ip_hl - doff;
	__u32 payload_at = tcp_at + doff;
	__u32 csum_at = tcp_at + 16;
	__sync_fetch_and_add(&t->seen, 1);

	if (!t->fired) {
		__u32 rel = seq - (t->isn + 1);
		if ((__s32)(rel - t->skip) < 0)
			return TC_ACT_OK; /* still in the part that passes */
		__u32 k = t->offset < payload ? t->offset : payload - 1;
		if (k > 0xffff)
			return TC_ACT_OK;
		/* one CPU wins the right to alter */
		if (__sync_val_compare_and_swap(&t->fired, 0, 2) != 0)
			return TC_ACT_OK;
		__u8 old_b, new_b;
		if (xor_payload_byte(skb, payload_at, k, payload, t->mask, csum_at, &old_b, &new_b)) {
			t->fired = 0; /* try the next segment */
			return TC_ACT_OK;
		}
		t->old_byte = old_b;
		t->new_byte = new_b;
		t->target_seq = seq + k;
		t->rel = rel + k;
		t->altered = 1;
		t->fired = 1;
		return TC_ACT_OK;
	}
	if (t->fired != 1)
		return TC_ACT_OK; /* another CPU is altering right now */
	/* a retransmission carrying the altered byte: the same change */
	__u32 into = t->target_seq - seq;
	if (into < payload && into <= 0xffff) {
		__u8 old_b, new_b;
		if (!xor_payload_byte(skb, payload_at, into, payload, t->mask, csum_at, &old_b, &new_b))
			__sync_fetch_and_add(&t->altered, 1);
	}
	return TC_ACT_OK;
}
