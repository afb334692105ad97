/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* Maps, packet access for both hooks, TCP option walking, checksum updates and the chain
 * stepping shared by every selector and actor. Every program is compiled twice from one
 * body: once for XDP (ingress) and once for TC (egress); `tc` is a compile-time constant. */
#ifndef NENA_COMMON_H
#define NENA_COMMON_H

#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "nena.h"

#define TC_ACT_OK 0
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_TCP_ 6
#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_ACK 0x10
#define TCPOPT_MPTCP 30
#define MPTCPOPT_MP_CAPABLE 0
#define MPTCPOPT_MP_JOIN 1
#define MPTCPOPT_DSS 2
#define MPTCPOPT_ADD_ADDR 3
#define MPTCPOPT_MP_PRIO 5
#define OPT_BUF 64 /* stack buffer for the (at most 40) option bytes; indices masked with 63 */
#define OPT_MAX 40

#define VERDICT(tc) ((tc) ? TC_ACT_OK : XDP_PASS)
#define DROP_VERDICT(tc) ((tc) ? 2 /* TC_ACT_SHOT */ : XDP_DROP)
#define NENA_DROP 2 /* an actor's return value: drop the packet, end the chain */

/* the kernel wants a GPL-compatible license string for some helpers; MIT is the project's */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- maps (user space pins every one of them under /sys/fs/bpf/nena/) ---- */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u32);
} jmp_xdp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u32);
} jmp_tc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NENA_MAX_CHAINS);
	__type(key, __u32);
	__type(value, struct chain);
} chains SEC(".maps");

/* (ifindex, hook) -> chain slot; an entry means "attached", NENA_NO_CHAIN means no chain */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct hook_key);
	__type(value, __u32);
} hooks SEC(".maps");

/* The same, as an array for interfaces below NENA_FAST_IFINDEX (index ifindex * 2 + hook),
 * which the dispatcher reads instead of hashing a key: 0 = not attached, else the chain slot
 * + 1 (NENA_NO_CHAIN stays NENA_NO_CHAIN). User space writes both; `hooks` stays the record
 * of what is attached. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NENA_FAST_IFINDEX * 2);
	__type(key, __u32);
	__type(value, __u32);
} hook_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NENA_MAX_CHAINS * NENA_MAX_LINKS);
	__type(key, __u32);
	__type(value, struct link_stats);
} link_stats SEC(".maps");

/* Per-flow state, in two maps per kind: NAME4 keyed by struct flow4 (IPv4 flows), NAME6 by
 * struct flow_key (IPv6 flows). FLOW_LOOKUP / FLOW_UPDATE pick the map and the key. */
#define FLOW_MAPS(NAME, VALUE, N)                                                              \
	struct {                                                                               \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                                           \
		__uint(max_entries, N);                                                        \
		__type(key, struct flow4);                                                     \
		__type(value, VALUE);                                                          \
	} NAME##4 SEC(".maps");                                                                \
	struct {                                                                               \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                                           \
		__uint(max_entries, N);                                                        \
		__type(key, struct flow_key);                                                  \
		__type(value, VALUE);                                                          \
	} NAME##6 SEC(".maps");

/* each flow's window scale and MP_PRIO (struct flow_state) */
FLOW_MAPS(flows, struct flow_state, 16384)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void bump(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &i);
	if (v)
		(*v)++;
}

FLOW_MAPS(kept, struct kept, 4096)

FLOW_MAPS(metrics, struct metrics, 16384)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* ---- packet access, the same for both hooks ---- */
/* Packet pointers read with inline asm: a plain `ctx->data` lets clang merge the loads of
 * both context types into one computed address, which the verifier refuses. */
static __always_inline void *pkt_begin(void *ctx, const int tc)
{
	void *p;
	if (tc)
		asm volatile("%0 = *(u32 *)(%1 + 76)" : "=r"(p) : "r"(ctx));
	else
		asm volatile("%0 = *(u32 *)(%1 + 0)" : "=r"(p) : "r"(ctx));
	return p;
}

static __always_inline void *pkt_end(void *ctx, const int tc)
{
	void *p;
	if (tc)
		asm volatile("%0 = *(u32 *)(%1 + 80)" : "=r"(p) : "r"(ctx));
	else
		asm volatile("%0 = *(u32 *)(%1 + 4)" : "=r"(p) : "r"(ctx));
	return p;
}

static __always_inline long ld_helper(void *ctx, const int tc, __u32 off, void *buf, __u32 len)
{
	if (tc)
		return bpf_skb_load_bytes(ctx, off, buf, len);
	return bpf_xdp_load_bytes(ctx, off, buf, len);
}

/* Copy a constant number of bytes out of the packet with the widest loads that fit: 8, then
 * 4, 2, 1 bytes. x86-64 and arm64 load unaligned packet data at full speed and the verifier
 * checks packet alignment only where the CPU cannot; the destination is a stack buffer that
 * must be aligned to the first chunk (the verifier refuses a misaligned stack store, so a
 * mistake shows at load time). Byte-wise copies cost about twice the instructions. */
#define PKT_COPY_CHUNK(T)                                                                      \
	if (__l - __i >= sizeof(T)) {                                                          \
		*(T *)(__d + __i) = *(const T *)(__s + __i);                                   \
		__i += sizeof(T);                                                              \
	}
#define pkt_copy(dst, src, len)                                                                \
	({                                                                                     \
		__u8 *__d = (__u8 *)(dst);                                                     \
		const __u8 *__s = (const __u8 *)(src);                                         \
		const __u32 __l = (len);                                                       \
		__u32 __i = 0;                                                                 \
		_Pragma("unroll") for (int __k = 0; __k < 8; __k++) { PKT_COPY_CHUNK(__u64) }  \
		PKT_COPY_CHUNK(__u32)                                                          \
		PKT_COPY_CHUNK(__u16)                                                          \
		PKT_COPY_CHUNK(__u8)                                                           \
	})

/* Copy len bytes at off. A constant length that lies in the linear data is read directly
 * (a few ns); anything else goes through the load helpers (non-linear skbs, XDP frags). */
#define ld(ctx, tc, off, buf, len)                                                             \
	({                                                                                     \
		long __r;                                                                      \
		__u32 __off = (off);                                                           \
		if (__builtin_constant_p(len) && (len) <= 64 && __off < 1024) {                \
			asm volatile("%0 &= 0x3ff" : "+r"(__off)); /* bound for the verifier */ \
			void *__b = pkt_begin(ctx, tc) + __off;                                \
			if (__b + (len) <= pkt_end(ctx, tc)) {                                 \
				pkt_copy((buf), __b, (len));                                   \
				__r = 0;                                                       \
			} else {                                                               \
				__r = ld_helper(ctx, tc, __off, (buf), (len));                 \
			}                                                                      \
		} else {                                                                       \
			__r = ld_helper(ctx, tc, __off, (buf), (len));                         \
		}                                                                              \
		__r;                                                                           \
	})

static __always_inline long st_helper(void *ctx, const int tc, __u32 off, void *buf, __u32 len)
{
	if (tc)
		return bpf_skb_store_bytes(ctx, off, buf, len, 0);
	return bpf_xdp_store_bytes(ctx, off, buf, len);
}

/* Store len bytes at off: as ld(), directly when the length is a constant and the bytes lie
 * in the linear data (a store helper costs 15-25 ns), else through the helpers. At TC a
 * direct write makes a cloned skb's header writable first, as bpf_skb_store_bytes does (the
 * verifier adds that to the program). buf: aligned to its first chunk, as for ld(). */
#define st(ctx, tc, off, buf, len)                                                             \
	({                                                                                     \
		long __r;                                                                      \
		__u32 __off = (off);                                                           \
		if (__builtin_constant_p(len) && (len) <= 64 && __off < 1024) {                \
			asm volatile("%0 &= 0x3ff" : "+r"(__off)); /* bound for the verifier */ \
			void *__b = pkt_begin(ctx, tc) + __off;                                \
			if (__b + (len) <= pkt_end(ctx, tc)) {                                 \
				pkt_copy(__b, (buf), (len));                                   \
				__r = 0;                                                       \
			} else {                                                               \
				__r = st_helper(ctx, tc, __off, (buf), (len));                 \
			}                                                                      \
		} else {                                                                       \
			__r = st_helper(ctx, tc, __off, (buf), (len));                         \
		}                                                                              \
		__r;                                                                           \
	})

static __always_inline __u32 pkt_len(void *ctx, const int tc)
{
	if (tc)
		return ((struct __sk_buff *)ctx)->len;
	struct xdp_md *x = ctx;
	return (__u32)(x->data_end - x->data);
}

/* ---- context in XDP metadata / skb->cb ---- */
union ctx_words {
	struct nena_ctx c;
	__u32 w[5];
};

/* *meta: where the nena_ctx lies in front of an XDP frame's data; -1 if the metadata is too
 * short for it. */
static __always_inline int xdp_meta(struct xdp_md *x, void **meta)
{
	void *m = (void *)(long)x->data_meta;
	void *data = (void *)(long)x->data;
	if (m + sizeof(struct nena_ctx) > data)
		return -1;
	*meta = m;
	return 0;
}

static __always_inline int ctx_load(void *ctx, const int tc, struct nena_ctx *c)
{
	union ctx_words u;
	if (tc) {
		struct __sk_buff *s = ctx;
		/* whole-word context loads; the barrier keeps clang from narrowing them */
		__u32 w0 = s->cb[0], w1 = s->cb[1], w2 = s->cb[2], w3 = s->cb[3], w4 = s->cb[4];
		asm volatile("" : "+r"(w0), "+r"(w1), "+r"(w2), "+r"(w3), "+r"(w4));
		u.w[0] = w0;
		u.w[1] = w1;
		u.w[2] = w2;
		u.w[3] = w3;
		u.w[4] = w4;
	} else {
		void *meta;
		if (xdp_meta(ctx, &meta))
			return -1;
		const __u32 *m = meta; /* whole words: a memcpy from packet memory goes byte by byte */
		for (int i = 0; i < 5; i++)
			u.w[i] = m[i];
	}
	if (u.c.magic != NENA_MAGIC)
		return -1;
	*c = u.c;
	return 0;
}

static __always_inline int ctx_store(void *ctx, const int tc, struct nena_ctx *c)
{
	union ctx_words u;
	u.c = *c;
	if (tc) {
		struct __sk_buff *s = ctx;
		__u32 w0 = u.w[0], w1 = u.w[1], w2 = u.w[2], w3 = u.w[3], w4 = u.w[4];
		asm volatile("" : "+r"(w0), "+r"(w1), "+r"(w2), "+r"(w3), "+r"(w4));
		s->cb[0] = w0;
		s->cb[1] = w1;
		s->cb[2] = w2;
		s->cb[3] = w3;
		s->cb[4] = w4;
	} else {
		void *meta;
		if (xdp_meta(ctx, &meta))
			return -1;
		__u32 *m = meta;
		for (int i = 0; i < 5; i++)
			m[i] = u.w[i];
	}
	return 0;
}

/* ---- the flow of a packet ---- */
static __always_inline int get_flow(void *ctx, const int tc, const struct nena_ctx *c,
				    struct flow_key *fk)
{
	__builtin_memset(fk, 0, sizeof(*fk));
	if (c->types & T_IPV6) {
		if (ld(ctx, tc, c->l3_off + 8, fk->saddr, 32) < 0) /* saddr, daddr adjacent */
			return -1;
		fk->family = 6;
	} else {
		__u32 a[2] __attribute__((aligned(8))); /* saddr, daddr: one load */
		if (ld(ctx, tc, c->l3_off + 12, a, 8) < 0)
			return -1;
		__builtin_memcpy(fk->saddr, &a[0], 4);
		__builtin_memcpy(fk->daddr, &a[1], 4);
		fk->family = 4;
	}
	if (ld(ctx, tc, c->l4_off, &fk->sport, 4) < 0)
		return -1;
	return 0;
}

static __always_inline void flow_reverse(const struct flow_key *in, struct flow_key *out)
{
	__builtin_memcpy(out->saddr, in->daddr, 16);
	__builtin_memcpy(out->daddr, in->saddr, 16);
	out->sport = in->dport;
	out->dport = in->sport;
	out->family = in->family;
	out->pad[0] = out->pad[1] = out->pad[2] = 0;
}

static __always_inline void flow4_of(const struct flow_key *fk, struct flow4 *k)
{
	__builtin_memcpy(k->saddr, fk->saddr, 4);
	__builtin_memcpy(k->daddr, fk->daddr, 4);
	k->sport = fk->sport;
	k->dport = fk->dport;
}

/* HELPER(map, key, ...) on the per-flow map NAME of the flow fk's family, with the key that
 * map takes. V6 must be a compile-time constant (a body specialised per family with
 * FAMILY_SPLIT), so that each path uses one map: a pointer that could come from either would
 * double the verifier's paths at every lookup. */
#define FLOW_MAP_CALL(HELPER, NAME, V6, fk, ...)                                               \
	({                                                                                     \
		struct flow4 __k4;                                                             \
		if (!(V6))                                                                     \
			flow4_of((fk), &__k4);                                                 \
		(V6) ? HELPER(&NAME##6, (fk), ##__VA_ARGS__)                                   \
		     : HELPER(&NAME##4, &__k4, ##__VA_ARGS__);                                 \
	})
#define FLOW_LOOKUP(NAME, V6, fk) FLOW_MAP_CALL(bpf_map_lookup_elem, NAME, V6, fk)
#define FLOW_UPDATE(NAME, V6, fk, val, flags)                                                  \
	FLOW_MAP_CALL(bpf_map_update_elem, NAME, V6, fk, val, flags)

/* NAME_body(ctx, tc, c, l) as NAME_fam(ctx, tc, c, l, v6), with v6 a constant on each path */
#define FAMILY_SPLIT(NAME)                                                                     \
	static __always_inline int NAME##_body(void *ctx, const int tc, struct nena_ctx *c,    \
					       const struct link *l)                           \
	{                                                                                      \
		if (c->types & T_IPV6)                                                         \
			return NAME##_fam(ctx, tc, c, l, 1);                                   \
		return NAME##_fam(ctx, tc, c, l, 0);                                           \
	}

/* ---- TCP options ---- */
/* The option bytes of one packet and the state of a walk over them. Walks run in bpf_loop
 * callbacks: the verifier checks a callback once, however many options there are. */
struct opts {
	__u8 b[OPT_BUF] __attribute__((aligned(8))); /* the (at most 40) option bytes; indices masked with 63 */
	__s32 olen;
	__s32 off;   /* walk position */
	__s32 found; /* result of find_opt: offset, or -1 */
	__s32 len;   /* its length */
	__s32 kind;  /* what find_opt looks for */
	__s32 sub;   /* MPTCP subtype, or -1 for any */
	__u32 t;     /* classify: packet-type bits */
	__u8 ws;     /* classify: window scale (0xff: none) */
};

/* Copy the options (doff - 20 bytes, at most 40) to o->b; returns their length or -1. */
static __always_inline int load_opts(void *ctx, const int tc, const struct nena_ctx *c,
				     struct opts *o)
{
	__u32 olen = c->doff;
	o->olen = 0;
	if (olen <= 20)
		return 0;
	olen -= 20;
	if (olen > OPT_MAX)
		return -1;
	/* a fixed-size read (direct when the bytes are in the linear data; what lies past the
	 * options is never looked at), else exactly the options through the helper */
	long r = olen <= 20 ? ld(ctx, tc, c->l4_off + 20, o->b, 20) : ld(ctx, tc, c->l4_off + 20, o->b, 40);
	if (r < 0 && ld_helper(ctx, tc, c->l4_off + 20, o->b, olen) < 0)
		return -1;
	o->olen = olen;
	return olen;
}

/* Where a walk may start: past the NOP, NOP, timestamps that lead most TCP headers (unless
 * the timestamps are what is looked for). */
static __always_inline int walk_start(const struct opts *o, int want_ts)
{
	if (!want_ts && o->olen >= 12 && o->b[0] == 1 && o->b[1] == 1 && o->b[2] == 8 && o->b[3] == 10)
		return 12;
	return 0;
}

/* One option: 0 to go on (o->off advanced), 1 to stop. *kind, *len of the option at o->off;
 * a length that does not fit (a lying length) stops the walk with -1 in *len. */
static __always_inline int opt_at(struct opts *o, int *kind, int *len)
{
	int off = o->off;
	if (off < 0 || off >= o->olen || off >= OPT_MAX)
		return 1;
	int k = o->b[off & 63];
	*kind = k;
	if (k == 0)
		return 1;
	if (k == 1) {
		*len = 1;
		return 0;
	}
	if (off + 1 >= o->olen) {
		*len = -1;
		return 1;
	}
	int l = o->b[(off + 1) & 63];
	if (l < 2 || off + l > o->olen) {
		*len = -1;
		return 1;
	}
	*len = l;
	return 0;
}

static long find_cb(__u32 i, void *arg)
{
	struct opts *o = arg;
	int k = 0, l = 0;
	if (opt_at(o, &k, &l))
		return 1;
	if (k == o->kind && l >= 2) {
		int off = o->off;
		if (k != TCPOPT_MPTCP || o->sub < 0 ||
		    (l >= 3 && (o->b[(off + 2) & 63] >> 4) == o->sub)) {
			o->found = off;
			o->len = l;
			return 1;
		}
	}
	o->off += l;
	return 0;
}

/* Offset in o->b of the first option of `kind` (and MPTCP `subtype`, if kind is MPTCP), or
 * -1; *len gets its length. A lying length ends the walk: such a packet is left alone. */
static __always_inline int find_opt(struct opts *o, int kind, int subtype, int *len)
{
	o->off = 0;
	o->found = -1;
	o->len = 0;
	o->kind = kind;
	o->sub = subtype;
	bpf_loop(OPT_MAX, find_cb, o, 0);
	*len = o->len;
	return o->found;
}

/* Load the options and find the MPTCP option of `subtype` in them: its offset in o->b, or -1
 * (no options, options that cannot be read, or no such option); *len gets its length. */
static __always_inline int find_mptcp(void *ctx, const int tc, const struct nena_ctx *c,
				      struct opts *o, int subtype, int *len)
{
	if (load_opts(ctx, tc, c, o) <= 0)
		return -1;
	return find_opt(o, TCPOPT_MPTCP, subtype, len);
}

/* ---- checksums: ones' complement sums in the raw (memory) representation of 16-bit words ---- */
static __always_inline __u32 fold(__u32 x)
{
	x = (x & 0xffff) + (x >> 16);
	x = (x & 0xffff) + (x >> 16);
	return x;
}

/* Difference to add when the 16-bit word `from` becomes `to` (both as read from the packet). */
static __always_inline __u32 diff16(__u16 from, __u16 to)
{
	return (__u32)(~from & 0xffff) + to;
}

/* Contribution of byte b at a position of the given parity (relative to an even offset). */
static __always_inline __u32 byte_word(__u8 b, int odd)
{
	return (__u32)b << ((odd & 1) << 3); /* no branch: keeps the verifier's paths few */
}

/* Difference to add when byte `from` at a position of that parity becomes `to`. */
static __always_inline __u32 diff8(__u8 from, __u8 to, int odd)
{
	return (~byte_word(from, odd) & 0xffff) + byte_word(to, odd);
}

/* The IP and TCP headers of a frame for direct reads and writes, NULL if they do not lie in
 * its linear data. Taken again after anything that resizes the frame (the helpers that do so
 * invalidate every packet pointer). *ip: the IP header (40 bytes checked for IPv6, 20 for
 * IPv4); the return value: the TCP header (its first 20 bytes). */
static __always_inline __u8 *hdrs(void *ctx, const int tc, const struct nena_ctx *c, __u8 **ip)
{
	__u32 l3 = c->l3_off, l4 = c->l4_off;
	asm volatile("%0 &= 0x3f" : "+r"(l3)); /* bounds for the verifier */
	asm volatile("%0 &= 0x3ff" : "+r"(l4));
	__u8 *data = pkt_begin(ctx, tc), *end = pkt_end(ctx, tc);
	__u8 *i = data + l3, *t = data + l4;
	if (i + 40 > end || t + 20 > end) /* an IPv4 header and a TCP header are 40 bytes too */
		return NULL;
	*ip = i;
	return t;
}

/* Apply a difference to the TCP checksum. pseudo: the difference is in the pseudo header
 * (the TCP length), which a CHECKSUM_PARTIAL skb keeps in the field as well. */
static __always_inline int tcp_csum_apply(void *ctx, const int tc, const struct nena_ctx *c,
					  __u32 diff, int pseudo)
{
	__u32 off = c->l4_off + 16;
	if (tc)
		return bpf_l4_csum_replace(ctx, off, 0, diff, pseudo ? BPF_F_PSEUDO_HDR : 0);
	__u8 *ip, *th = hdrs(ctx, tc, c, &ip);
	if (th) { /* in place: a store helper costs more than the rest */
		__u16 s = *(__u16 *)(th + 16);
		*(__u16 *)(th + 16) = ~fold((__u32)(~s & 0xffff) + fold(diff));
		return 0;
	}
	__u16 sum;
	if (ld(ctx, tc, off, &sum, 2) < 0)
		return -1;
	sum = ~fold((__u32)(~sum & 0xffff) + fold(diff));
	return st(ctx, tc, off, &sum, 2);
}

/* Add n (multiple of 4, at most 32) option bytes at the end of the TCP header of a pure ACK
 * (no payload, so nothing moves: the frame grows at its tail, the TCP header stays where the
 * stack and a CHECKSUM_PARTIAL skb expect it). Fixes data offset, IP length, IPv4 header
 * checksum and the TCP checksum. Returns 0 on success, <0 if the packet is left untouched.
 * One helper grows the frame; the option and the header fields are written in place (a store
 * helper each cost about 15-25 ns), the TCP checksum by one bpf_l4_csum_replace per part at
 * TC (a CHECKSUM_PARTIAL skb takes only the pseudo header's) and in place at XDP. */
static __always_inline int insert_opt(void *ctx, const int tc, struct nena_ctx *c, __u8 *opt,
				      __u32 n)
{
	if (!(c->types & T_PURE_ACK) || (c->types & T_MALFORMED))
		return -1;
	if (n == 0 || n > 32 || (n & 3) || c->doff + n > 60)
		return -1;
	__u32 end = c->l4_off + c->doff;
	if (pkt_len(ctx, tc) != end) /* trailing bytes (padding): do not guess */
		return -1;
	__u8 *ip;
	if (!hdrs(ctx, tc, c, &ip)) /* headers not linear: left alone */
		return -1;
	if (tc) {
		if (bpf_skb_change_tail(ctx, end + n, 0))
			return -1;
	} else {
		if (bpf_xdp_adjust_tail(ctx, n))
			return -1;
	}
	__u8 *th = hdrs(ctx, tc, c, &ip);
	if (!th)
		return -1;
	/* the option, a word at a time, at the end of the header (now the end of the frame) */
	__u32 e = end;
	asm volatile("%0 &= 0x3ff" : "+r"(e)); /* bound for the verifier */
	__u8 *o = pkt_begin(ctx, tc) + e;
#pragma unroll
	for (int i = 0; i < 32; i += 4) {
		if (i < n) {
			if (o + i + 4 > (__u8 *)pkt_end(ctx, tc))
				return -1;
			*(__u32 *)(o + i) = *(__u32 *)(opt + i);
		}
	}
	/* data offset */
	__u16 w0 = *(__u16 *)(th + 12), w1 = w0;
	((__u8 *)&w1)[0] = (((c->doff + n) >> 2) << 4) | (((__u8 *)&w0)[0] & 0x0f);
	*(__u16 *)(th + 12) = w1;
	__u32 diff = diff16(w0, w1);
#pragma unroll
	for (int i = 0; i < 32; i += 2) {
		if (i < n)
			diff += (__u32)opt[i] | ((__u32)opt[i + 1] << 8);
	}
	/* IP length */
	if (c->types & T_IPV6) {
		__u16 pl = *(__u16 *)(ip + 4);
		*(__u16 *)(ip + 4) = bpf_htons(bpf_ntohs(pl) + n);
	} else {
		__u16 tl = *(__u16 *)(ip + 2), ntl = bpf_htons(bpf_ntohs(tl) + n);
		__u16 hc = *(__u16 *)(ip + 10);
		*(__u16 *)(ip + 2) = ntl;
		*(__u16 *)(ip + 10) = ~fold((__u32)(~hc & 0xffff) + diff16(tl, ntl));
	}
	/* TCP checksum: content, then the TCP length in the pseudo header */
	__u16 ol = bpf_htons(c->doff), nl = bpf_htons(c->doff + n);
	c->doff += n;
	if (tc)
		return tcp_csum_apply(ctx, tc, c, diff, 0) < 0 ||
		       tcp_csum_apply(ctx, tc, c, diff16(ol, nl), 1) < 0 ? -1 : 0;
	__u16 sum = *(__u16 *)(th + 16);
	*(__u16 *)(th + 16) = ~fold((__u32)(~sum & 0xffff) + fold(diff) + diff16(ol, nl));
	return 0;
}

/* ---- chains ---- */
static __always_inline void *jmp_table(const int tc)
{
	return tc ? (void *)&jmp_tc : (void *)&jmp_xdp;
}

#endif
