/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* mpc: the papers' own negotiation of the scrambling (`--mode kato-mpc`), at TC (clsact,
 * direct action) on the interface that carries a connection's first subflow.
 *
 * Two programs, `tc_mpc_egress` and `tc_mpc_ingress`, on the same interface; the map
 * `ports` says which TCP ports are ours and in which role (client: the port is the peer's;
 * server: the port is ours). For those connections it
 *
 *  - marks the negotiation on the handshake packets that carry MP_CAPABLE:
 *      client egress SYN:      "I ask for kato-mpc"          (the request)
 *      server egress SYN-ACK:  "I agree" (only if the SYN asked)  (the consent)
 *    with the method in `ports` (user space chooses):
 *      MPC_METHOD_OPTION: an RFC 6994 experimental TCP option (kind 253, length 4, ExID
 *        MPC_EXID) appended after the existing options: the packet grows by 4 bytes at its
 *        tail (a SYN or SYN-ACK has no payload), data offset, IP length and checksums fixed;
 *      MPC_METHOD_FLAG: an unassigned MP_CAPABLE flag bit (RFC 8684 3.1, bit D = 0x10) set
 *        in place, TCP checksum fixed. Linux refuses an MP_CAPABLE whose bits D-G are set
 *        (it treats the SYN as plain TCP: the connection falls back), so this method exists
 *        only for the test that shows it (docs/PROTOCOL.md, "kato-mpc").
 *  - records, per connection (the 4-tuple of the first subflow, seen from this host), what
 *    was asked and agreed and both MPTCP keys as they cross in clear: the SYN-ACK carries the
 *    server's key, the third ACK (or the first data segment) both keys. User space reads
 *    the record of its socket (`flows`), checks the token (SHA-256 of the local key against
 *    MPTCP_INFO's mptcpi_token) and derives the scrambling keys.
 *
 * The program never drops or delays a packet; it returns TC_ACT_UNSPEC so that other filters
 * on the hook (nena's policy dispatcher) still run. IPv4 and IPv6 without extension headers.
 */
#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define PROTO_TCP 6
#define TCPF_SYN 0x02
#define TCPF_ACK 0x10
#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_MPTCP 30
#define TCPOPT_EXP 253
/* The ExID of nena's experimental option ("NE"): not registered with IANA (RFC 6994 asks
 * for registration; a deployment would register one). */
#define MPC_EXID 0x4e45
#define MPC_FLAG_BIT 0x10 /* MP_CAPABLE flag D */

#define MPC_ROLE_CLIENT 1
#define MPC_ROLE_SERVER 2
#define MPC_METHOD_OPTION 1
#define MPC_METHOD_FLAG 2

/* flow flags */
#define F_REQUESTED 0x01 /* the SYN carried the request (added here or seen here) */
#define F_CONSENTED 0x02 /* the SYN-ACK carried the consent (added here or seen here) */
#define F_LOCAL_KEY 0x04
#define F_REMOTE_KEY 0x08
#define F_MPC_SYN 0x10      /* the SYN carried MP_CAPABLE */
#define F_MPC_SYNACK 0x20   /* the SYN-ACK carried MP_CAPABLE */
#define F_MARK_FAILED 0x40  /* a mark could not be added (no room, EOL, helper error) */

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* A TCP port of ours and what to do for it. */
struct mpc_port {
	__u32 role;   /* MPC_ROLE_* */
	__u32 method; /* MPC_METHOD_* */
	__u32 users;  /* user space: processes using this entry */
	__u32 pad;
};

/* A connection's first subflow, seen from this host (ports and addresses in network order;
 * IPv4 addresses in the first 4 bytes). */
struct mpc_flow_key {
	__u8 v6;
	__u8 pad[3];
	__u16 lport;
	__u16 rport;
	__u8 laddr[16];
	__u8 raddr[16];
};

struct mpc_flow {
	__u32 flags;
	__u32 pad;
	__u8 local_key[8];  /* as on the wire (big-endian), as the papers' code copies it */
	__u8 remote_key[8];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16); /* port, host order */
	__type(value, struct mpc_port);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mpc_flow_key);
	__type(value, struct mpc_flow);
} flows SEC(".maps");

/* Counters: 0 requests added, 1 consents added, 2 requests seen, 3 consents seen,
 * 4 keys recorded, 5 marks that failed. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

/* What the options of one TCP header hold. */
struct opts {
	__s32 mpc_at;   /* offset of MP_CAPABLE from the TCP header, -1: none */
	__u32 mpc_len;
	__u8 marked;    /* our experimental option is there */
	__u8 eol;       /* an EOL ends the options early */
};

/* The option walk, one option per bpf_loop step (verified once, whatever the options). */
struct scan {
	__u8 buf[64];
	__u32 i;
	__u32 n;
	struct opts o;
};

static long scan_step(__u32 idx, void *data)
{
	struct scan *s = data;
	__u32 i = s->i;

	if (i >= s->n || i >= 40)
		return 1;
	__u8 kind = s->buf[i & 0x3f];
	if (kind == TCPOPT_EOL) {
		s->o.eol = 1;
		return 1;
	}
	if (kind == TCPOPT_NOP) {
		s->i = i + 1;
		return 0;
	}
	if (i + 1 >= s->n)
		return 1;
	__u8 len = s->buf[(i + 1) & 0x3f];
	if (len < 2 || i + len > s->n)
		return 1;
	if (kind == TCPOPT_MPTCP && len >= 4 && (s->buf[(i + 2) & 0x3f] >> 4) == 0) {
		s->o.mpc_at = 20 + i;
		s->o.mpc_len = len;
	}
	if (kind == TCPOPT_EXP && len == 4 && s->buf[(i + 2) & 0x3f] == (MPC_EXID >> 8) &&
	    s->buf[(i + 3) & 0x3f] == (MPC_EXID & 0xff))
		s->o.marked = 1;
	s->i = i + len;
	return 0;
}

static __always_inline void parse_opts(struct __sk_buff *skb, __u32 tcp_at, __u32 doff,
				       struct opts *o)
{
	struct scan s = {};
	__u32 n = doff - 20;

	o->mpc_at = -1;
	o->mpc_len = 0;
	o->marked = 0;
	o->eol = 0;
	if (n == 0 || n > 40)
		return;
	if (bpf_skb_load_bytes(skb, tcp_at + 20, s.buf, n))
		return;
	s.n = n;
	s.o.mpc_at = -1;
	bpf_loop(40, scan_step, &s, 0);
	*o = s.o;
}

/* The parsed headers of a TCP packet. */
struct pkt {
	__u8 v6;
	__u32 ip_hl;
	__u32 total; /* IP total length */
	__u32 tcp_at;
	__u32 doff;
	__u8 flags;
	__u16 sport, dport; /* network order */
	__u8 saddr[16] __attribute__((aligned(8)));
	__u8 daddr[16] __attribute__((aligned(8)));
};

static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	__u16 proto;
	struct tcphdr th;

	if (bpf_skb_load_bytes(skb, 12, &proto, 2))
		return -1;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) || ip.protocol != PROTO_TCP)
			return -1;
		if (ip.frag_off & bpf_htons(0x3fff))
			return -1;
		p->ip_hl = ip.ihl * 4;
		p->total = bpf_ntohs(ip.tot_len);
		__builtin_memcpy(p->saddr, &ip.saddr, 4);
		__builtin_memcpy(p->daddr, &ip.daddr, 4);
		p->v6 = 0;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)) || ip6.nexthdr != PROTO_TCP)
			return -1;
		p->ip_hl = sizeof(ip6);
		p->total = sizeof(ip6) + bpf_ntohs(ip6.payload_len);
		__builtin_memcpy(p->saddr, &ip6.saddr, 16);
		__builtin_memcpy(p->daddr, &ip6.daddr, 16);
		p->v6 = 1;
	} else {
		return -1;
	}
	if (p->ip_hl < 20 || p->ip_hl > 60)
		return -1;
	p->tcp_at = ETH_HLEN + p->ip_hl;
	if (bpf_skb_load_bytes(skb, p->tcp_at, &th, sizeof(th)))
		return -1;
	p->doff = th.doff * 4;
	if (p->doff < 20 || p->doff > 60 || p->total < p->ip_hl + p->doff)
		return -1;
	p->flags = ((__u8 *)&th)[13];
	p->sport = th.source;
	p->dport = th.dest;
	return 0;
}

/* Appends our experimental option to a packet without payload (a SYN or SYN-ACK): the
 * packet grows by 4 bytes at its tail, the data offset by one word; the IP length, the IP
 * checksum (v4) and the TCP checksum (pseudo-header length, the data offset word, the new
 * option) are updated. With CHECKSUM_PARTIAL the TCP checksum field holds only the pseudo
 * header's sum, which the BPF_F_PSEUDO_HDR update keeps right; the header's own words are
 * summed later over the grown packet. */
static __always_inline int add_option(struct __sk_buff *skb, struct pkt *p)
{
	if (p->doff + 4 > 60)
		return -1;
	if (p->total != p->ip_hl + p->doff)
		return -1; /* payload: not a bare handshake packet */
	if (skb->len != ETH_HLEN + p->total)
		return -1; /* trailing bytes (padding): leave it alone */
	__u32 csum_at = p->tcp_at + 16;
	__u32 word_at = p->tcp_at + 12;
	__u16 old_word, new_word;
	if (bpf_skb_load_bytes(skb, word_at, &old_word, 2))
		return -1;
	/* first byte: data offset (high nibble) and reserved bits */
	__u8 wb[2];
	__builtin_memcpy(wb, &old_word, 2);
	wb[0] = (__u8)((((p->doff + 4) / 4) << 4) | (wb[0] & 0x0f));
	__builtin_memcpy(&new_word, wb, 2);

	if (bpf_skb_change_tail(skb, skb->len + 4, 0))
		return -1;
	__u8 opt[4] = {TCPOPT_EXP, 4, MPC_EXID >> 8, MPC_EXID & 0xff};
	__u32 opt_at = p->tcp_at + p->doff;
	if (bpf_skb_store_bytes(skb, opt_at, opt, 4, 0))
		return -1;
	__u16 o1, o2;
	__builtin_memcpy(&o1, opt, 2);
	__builtin_memcpy(&o2, opt + 2, 2);
	if (bpf_skb_store_bytes(skb, word_at, &new_word, 2, 0))
		return -1;
	if (bpf_l4_csum_replace(skb, csum_at, old_word, new_word, 2) ||
	    bpf_l4_csum_replace(skb, csum_at, 0, o1, 2) ||
	    bpf_l4_csum_replace(skb, csum_at, 0, o2, 2))
		return -1;
	if (p->v6) {
		__u16 old_pl = bpf_htons(p->total - 40), new_pl = bpf_htons(p->total - 40 + 4);
		if (bpf_skb_store_bytes(skb, ETH_HLEN + 4, &new_pl, 2, 0))
			return -1;
		__u32 old_l = bpf_htonl(p->doff), new_l = bpf_htonl(p->doff + 4);
		if (bpf_l4_csum_replace(skb, csum_at, old_l, new_l, BPF_F_PSEUDO_HDR | 4))
			return -1;
		(void)old_pl;
	} else {
		__u16 old_tot = bpf_htons(p->total), new_tot = bpf_htons(p->total + 4);
		if (bpf_skb_store_bytes(skb, ETH_HLEN + 2, &new_tot, 2, 0))
			return -1;
		if (bpf_l3_csum_replace(skb, ETH_HLEN + 10, old_tot, new_tot, 2))
			return -1;
		__u16 old_l = bpf_htons(p->doff), new_l = bpf_htons(p->doff + 4);
		if (bpf_l4_csum_replace(skb, csum_at, old_l, new_l, BPF_F_PSEUDO_HDR | 2))
			return -1;
	}
	return 0;
}

/* Sets MP_CAPABLE's flag bit D in place (the kernel refuses it: see the top). */
static __always_inline int set_flag(struct __sk_buff *skb, struct pkt *p, struct opts *o)
{
	__u32 at = p->tcp_at + (__u32)o->mpc_at + 2; /* subtype/version, flags */
	__u16 old_w, new_w;
	__u8 b[2];
	if (bpf_skb_load_bytes(skb, at, b, 2))
		return -1;
	__builtin_memcpy(&old_w, b, 2);
	b[1] |= MPC_FLAG_BIT;
	__builtin_memcpy(&new_w, b, 2);
	/* the option starts at an even offset in Linux's layout; if not, the word pairs
	 * differently and the sum would be wrong: refuse */
	if (((__u32)o->mpc_at + 2) & 1)
		return -1;
	if (bpf_skb_store_bytes(skb, at, b, 2, 0))
		return -1;
	return bpf_l4_csum_replace(skb, p->tcp_at + 16, old_w, new_w, 2);
}

static __always_inline int has_flag(struct __sk_buff *skb, struct pkt *p, struct opts *o)
{
	__u8 f = 0;
	if (bpf_skb_load_bytes(skb, p->tcp_at + (__u32)o->mpc_at + 3, &f, 1))
		return 0;
	return (f & MPC_FLAG_BIT) != 0;
}

static __always_inline int mpc(struct __sk_buff *skb, const int egress)
{
	struct pkt p = {};
	struct opts o;

	if (parse(skb, &p))
		return TC_ACT_UNSPEC;
	__u16 lport = egress ? p.sport : p.dport, rport = egress ? p.dport : p.sport;
	__u16 hp = bpf_ntohs(lport);
	struct mpc_port *cfg = bpf_map_lookup_elem(&ports, &hp);
	if (!cfg || cfg->role != MPC_ROLE_SERVER) {
		hp = bpf_ntohs(rport);
		cfg = bpf_map_lookup_elem(&ports, &hp);
		if (!cfg || cfg->role != MPC_ROLE_CLIENT)
			return TC_ACT_UNSPEC;
	}
	__u32 role = cfg->role, method = cfg->method;
	parse_opts(skb, p.tcp_at, p.doff, &o);
	if (o.mpc_at < 0)
		return TC_ACT_UNSPEC; /* not an MP_CAPABLE packet: nothing to do */

	struct mpc_flow_key k = {};
	k.v6 = p.v6;
	k.lport = lport;
	k.rport = rport;
	__builtin_memcpy(k.laddr, egress ? p.saddr : p.daddr, 16);
	__builtin_memcpy(k.raddr, egress ? p.daddr : p.saddr, 16);

	__u8 syn = p.flags & TCPF_SYN, ack = p.flags & TCPF_ACK;
	struct mpc_flow *f;

	if (syn && !ack) {
		/* a SYN (or its retransmission) starts the record afresh */
		struct mpc_flow nf = {};
		nf.flags = F_MPC_SYN;
		if (egress && role == MPC_ROLE_CLIENT) {
			int r = method == MPC_METHOD_FLAG ? set_flag(skb, &p, &o) : add_option(skb, &p);
			if (r) {
				nf.flags |= F_MARK_FAILED;
				count(5);
			} else {
				nf.flags |= F_REQUESTED;
				count(0);
			}
		} else if (!egress && role == MPC_ROLE_SERVER) {
			if (method == MPC_METHOD_FLAG ? has_flag(skb, &p, &o) : o.marked) {
				nf.flags |= F_REQUESTED;
				count(2);
			}
		} else {
			return TC_ACT_UNSPEC;
		}
		bpf_map_update_elem(&flows, &k, &nf, BPF_ANY);
		return TC_ACT_UNSPEC;
	}

	f = bpf_map_lookup_elem(&flows, &k);
	if (!f)
		return TC_ACT_UNSPEC;
	__u32 key_at = p.tcp_at + (__u32)o.mpc_at + 4;

	if (syn && ack) {
		/* the SYN-ACK: the server's key */
		if (o.mpc_len < 12)
			return TC_ACT_UNSPEC;
		if (egress && role == MPC_ROLE_SERVER) {
			if (bpf_skb_load_bytes(skb, key_at, f->local_key, 8) == 0)
				__sync_fetch_and_or(&f->flags, F_LOCAL_KEY | F_MPC_SYNACK);
			if (f->flags & F_REQUESTED) {
				int r = method == MPC_METHOD_FLAG ? set_flag(skb, &p, &o) : add_option(skb, &p);
				if (r) {
					__sync_fetch_and_or(&f->flags, F_MARK_FAILED);
					count(5);
				} else {
					__sync_fetch_and_or(&f->flags, F_CONSENTED);
					count(1);
				}
			}
		} else if (!egress && role == MPC_ROLE_CLIENT) {
			if (bpf_skb_load_bytes(skb, key_at, f->remote_key, 8) == 0)
				__sync_fetch_and_or(&f->flags, F_REMOTE_KEY | F_MPC_SYNACK);
			if ((f->flags & F_REQUESTED) &&
			    (method == MPC_METHOD_FLAG ? has_flag(skb, &p, &o) : o.marked)) {
				__sync_fetch_and_or(&f->flags, F_CONSENTED);
				count(3);
			}
		}
		return TC_ACT_UNSPEC;
	}

	/* the third ACK or the first data segment: both keys, the sender's first */
	if (o.mpc_len < 20 || (f->flags & (F_LOCAL_KEY | F_REMOTE_KEY)) == (F_LOCAL_KEY | F_REMOTE_KEY))
		return TC_ACT_UNSPEC;
	__u8 keys[16];
	if (bpf_skb_load_bytes(skb, key_at, keys, 16))
		return TC_ACT_UNSPEC;
	if (egress && role == MPC_ROLE_CLIENT) {
		__builtin_memcpy(f->local_key, keys, 8);
		__builtin_memcpy(f->remote_key, keys + 8, 8);
	} else if (!egress && role == MPC_ROLE_SERVER) {
		__builtin_memcpy(f->remote_key, keys, 8);
		__builtin_memcpy(f->local_key, keys + 8, 8);
	} else {
		return TC_ACT_UNSPEC;
	}
	__sync_fetch_and_or(&f->flags, F_LOCAL_KEY | F_REMOTE_KEY);
	count(4);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int tc_mpc_egress(struct __sk_buff *skb)
{
	return mpc(skb, 1);
}

SEC("tc")
int tc_mpc_ingress(struct __sk_buff *skb)
{
	return mpc(skb, 0);
}
