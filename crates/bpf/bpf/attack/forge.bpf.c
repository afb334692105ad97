/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* forge: the lab's smart active attacker on one path (`nena lab forge`, tests).
 *
 * At TC (clsact, direct action) on one interface, it watches the first TCP flow toward a
 * configured port whose SYN it sees (on the untrusted link: the MPTCP subflow that joined
 * there) and XORs a chosen pattern into the bytes of the MPTCP *data stream* at a chosen data
 * sequence number (DSN): for every data segment it reads the DSS option's mapping (DSN,
 * subflow sequence number, length), works out which DSN each payload byte carries, and XORs
 * `xor[j]` into the byte whose DSN is `dsn + j`. The TCP checksum is fixed per 16-bit word
 * (bpf_l4_csum_replace), so the receiver accepts the segment; a retransmission is altered the
 * same way. Bytes that travel on another path are out of its reach (the map says which pattern
 * bytes it altered: `done`).
 *
 * This is what an attacker who knows the plaintext does to a keystream (XOR the difference
 * between the real and the wanted plaintext) and, with the pattern spread over 65 bytes per
 * change, to the papers' scrambling. User space writes the pattern and the DSN later (`armed`),
 * once it knows where the bytes lie; nothing is pinned: the filter keeps the program and its
 * map alive until it is removed or the namespace is deleted.
 */
#include "segment.h"

#define TCPOPT_MPTCP 30
#define MPTCP_SUB_DSS 2
#define DSS_A 0x01
#define DSS_a 0x02
#define DSS_M 0x04
#define DSS_m 0x08
#define FORGE_MAX 160

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct forge {
	/* configuration */
	__u16 port;        /* destination port of the flow, host order */
	__u8 armed;        /* 1 once user space wrote `dsn`, `len` and `xor` */
	__u8 have_flow;    /* the flow's SYN passed */
	__u32 len;         /* pattern bytes (<= FORGE_MAX) */
	__u64 dsn;         /* DSN of the first pattern byte (the low 32 bits are compared) */
	__u32 owns_clsact; /* user space only: it created the clsact qdisc */
	__u32 isn;         /* the flow's initial sequence number */
	__u16 sport, dport; /* network order */
	__u32 pad0;
	/* what happened */
	__u64 seen;        /* data segments of the flow */
	__u64 mapped;      /* of them with a DSS mapping */
	__u64 altered;     /* bytes altered (a retransmitted byte counts again) */
	__u64 segments;    /* segments altered */
	__u8 done[FORGE_MAX]; /* pattern byte j was altered at least once */
	__u8 xor[FORGE_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct forge);
} forge SEC(".maps");

static __always_inline __u32 be32_at(const __u8 *o, __u32 i)
{
	return ((__u32)o[i & 63] << 24) | ((__u32)o[(i + 1) & 63] << 16) |
	       ((__u32)o[(i + 2) & 63] << 8) | (__u32)o[(i + 3) & 63];
}

/* The TCP options of one segment, walked one option per bpf_loop step. */
struct opts {
	__u8 o[64];
	__u32 len, i, found, dsn_lo, ssn, dlen;
};

/* One option at `i`: a DSS with a mapping fills `found`, `dsn_lo`, `ssn`, `dlen`. Returns 1
 * (stop) at the end of the options, at a malformed one, or after the DSS. */
static long opt_step(__u64 n, void *ctx)
{
	struct opts *p = ctx;
	__u32 i = p->i;
	if (i >= p->len || i >= 40)
		return 1;
	__u8 kind = p->o[i & 63];
	if (kind == 0)
		return 1;
	if (kind == 1) {
		p->i = i + 1;
		return 0;
	}
	__u8 len = p->o[(i + 1) & 63];
	if (len < 2)
		return 1;
	if (kind == TCPOPT_MPTCP && len >= 4 && (p->o[(i + 2) & 63] >> 4) == MPTCP_SUB_DSS) {
		__u8 fl = p->o[(i + 3) & 63];
		__u32 q = i + 4;
		if (fl & DSS_A)
			q += (fl & DSS_a) ? 8 : 4;
		if (fl & DSS_M) {
			if (fl & DSS_m)
				q += 4; /* the high half of a 64-bit DSN */
			p->dsn_lo = be32_at(p->o, q);
			p->ssn = be32_at(p->o, q + 4);
			p->dlen = ((__u32)p->o[(q + 8) & 63] << 8) | p->o[(q + 9) & 63];
			p->found = q + 10 <= i + len;
		}
		return 1;
	}
	p->i = i + len;
	return 0;
}

/* One segment being altered, for the pattern loop (bpf_loop: its body is verified once). */
struct walk {
	struct __sk_buff *skb;
	struct forge *f;
	__u32 start; /* low 32 bits of the DSN of the segment's first payload byte */
	__u32 payload_at, payload, csum_at;
	int hit;
};

/* Pattern byte `j`: XORed into the segment if its DSN lies there. */
static long pattern_byte(__u64 j, void *ctx)
{
	struct walk *w = ctx;
	struct forge *f = w->f;
	if (j >= FORGE_MAX)
		return 1;
	__u32 k = (__u32)f->dsn + (__u32)j - w->start;
	if (k >= w->payload || k > 0xffff)
		return 0;
	__u8 m = f->xor[j];
	if (!m)
		return 0;
	__u8 old_b, new_b;
	if (xor_payload_byte(w->skb, w->payload_at, k, w->payload, m, w->csum_at, &old_b, &new_b))
		return 0;
	f->done[j] = 1;
	__sync_fetch_and_add(&f->altered, 1);
	w->hit = 1;
	return 0;
}

SEC("tc")
int tc_forge(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct forge *f = bpf_map_lookup_elem(&forge, &zero);
	struct segment s = {};

	if (!f || !f->port)
		return TC_ACT_OK;
	if (parse_segment(skb, &s))
		return TC_ACT_OK;
	struct tcphdr th = s.th;
	__u32 ip_hl = s.ip_hl, total = s.total, tcp_at = s.tcp_at;
	if (bpf_ntohs(th.dest) != f->port)
		return TC_ACT_OK;
	__u32 seq = bpf_ntohl(th.seq);
	__u8 flags = ((__u8 *)&th)[13];
	if (flags & TCPF_SYN) {
		if (!f->have_flow || (f->sport == th.source && f->dport == th.dest)) {
			f->have_flow = 1;
			f->sport = th.source;
			f->dport = th.dest;
			f->isn = seq;
		}
		return TC_ACT_OK;
	}
	if (!f->have_flow || f->sport != th.source || f->dport != th.dest)
		return TC_ACT_OK;
	__u32 doff = th.doff * 4;
	if (doff < 20 || doff > 60 || total <= ip_hl + doff)
		return TC_ACT_OK;
	__u32 payload = total - ip_hl - doff;
	__u32 payload_at = tcp_at + doff;
	__u32 csum_at = tcp_at + 16;
	__sync_fetch_and_add(&f->seen, 1);

	/* the DSS option's mapping */
	struct opts po = {};
	__u32 olen = doff - 20;
	if (olen == 0 || olen > 40)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, tcp_at + 20, po.o, olen))
		return TC_ACT_OK;
	po.len = olen;
	bpf_loop(40, opt_step, &po, 0);
	__u32 found = po.found, dsn_lo = po.dsn_lo, ssn = po.ssn, dlen = po.dlen;
	if (!found || !dlen)
		return TC_ACT_OK;
	__sync_fetch_and_add(&f->mapped, 1);
	if (!f->armed)
		return TC_ACT_OK;
	/* DSN of the first payload byte: the mapping's DSN plus how far into the mapping the
	 * segment starts (the subflow sequence number counts from the SYN) */
	struct walk w = {
		.skb = skb,
		.f = f,
		.start = dsn_lo + ((seq - f->isn) - ssn),
		.payload_at = payload_at,
		.payload = payload,
		.csum_at = csum_at,
		.hit = 0,
	};
	__u32 n_pat = f->len;
	if (n_pat > FORGE_MAX)
		n_pat = FORGE_MAX;
	bpf_loop(n_pat, pattern_byte, &w, 0);
	int hit = w.hit;
	if (hit)
		__sync_fetch_and_add(&f->segments, 1);
	return TC_ACT_OK;
}
