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
 *      client egress third ACK: "I saw your consent"     (the confirmation; only then)
 *  - records, per connection (the 4-tuple of the first subflow, seen from this host), what
 *    was asked and agreed and both MPTCP keys as they cross in clear: the SYN-ACK carries the
 *    server's key, the third ACK (or the first data segment) both keys. User space reads
 *    the record of its socket, checks the token (SHA-256 of the local key against
 *    MPTCP_INFO's mptcpi_token) and derives the scrambling keys.
 *
 * Two maps hold the records. `flows` (an LRU) holds the handshake in progress: the client's
 * own connections, and on the server what each MP_CAPABLE SYN asked (which the SYN-ACK's
 * consent needs, microseconds later). Anyone can send SYNs, so a SYN flood can push a
 * server's entries out of it; the server therefore does not decide from it. Its decision
 * is in `established` (an LRU hash too): an entry is made only from the ACK that completes
 * a handshake the kernel knows, checked here before the stack sees it: a request socket for
 * its 4-tuple whose SYN-ACK sequence number the ACK acknowledges, or, under SYN cookies, a
 * valid cookie (bpf_tcp_check_syncookie). A spoofed SYN cannot reach that point, and a
 * forged ACK does not pass the check. User space deletes the entry when it has read it
 * (whatever it holds), and sweeps entries older than a minute (handshakes never accepted,
 * connections that fell back to TCP). When the table is full, a new completed handshake
 * takes the place of the least recently made entry: the table never refuses a new one, and
 * pushing out a connection's entry before its server accepted it takes as many real,
 * completed handshakes as the table holds; that connection is then refused by the server
 * (no record: it fails closed, never plain), not scrambled with wrong keys.
 *
 * The program never drops or delays a packet; it returns TC_ACT_UNSPEC so that other filters
 * on the hook (nena's policy dispatcher) still run. IPv4 and IPv6 without extension headers.
 */
#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

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
#define F_CONFIRMED 0x80    /* the third ACK carried the confirmation (added here or seen here) */

/* mpc_port.flags */
#define PORT_NO_VERIFY 0x01 /* BPF_PROG_TEST_RUN only: no socket to check the ACK against */


char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* A TCP port of ours and what to do for it. */
struct mpc_port {
	__u32 role;   /* MPC_ROLE_* */
	__u32 method; /* MPC_METHOD_* */
	__u32 users;  /* user space: processes using this entry */
	__u32 flags;  /* PORT_* */
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
	__u64 born;         /* bpf_ktime_get_ns() when made (CLOCK_MONOTONIC) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16); /* port, host order */
	__type(value, struct mpc_port);
} ports SEC(".maps");

/* Handshakes in progress (see the top: a SYN flood can evict these). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mpc_flow_key);
	__type(value, struct mpc_flow);
} flows SEC(".maps");

/* Server: connections whose handshake completed (checked against the kernel's request
 * socket or SYN cookie); full, the least recently made entry goes (see the top). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mpc_flow_key);
	__type(value, struct mpc_flow);
} established SEC(".maps");

/* Counters: 0 requests added, 1 consents added, 2 requests seen, 3 consents seen,
 * 4 keys recorded, 5 marks that failed, 6 confirmations added or seen, 7 completing ACKs
 * refused (no request socket or cookie they complete) or not recorded (the update failed). */
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
	__s32 mark_at;  /* offset of our experimental option from the TCP header, -1: none */
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
	    s->buf[(i + 3) & 0x3f] == (MPC_EXID & 0xff)) {
		s->o.marked = 1;
		s->o.mark_at = 20 + i;
	}
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
	o->mark_at = -1;
	o->marked = 0;
	o->eol = 0;
	if (n == 0 || n > 40)
		return;
	if (bpf_skb_load_bytes(skb, tcp_at + 20, s.buf, n))
		return;
	s.n = n;
	s.o.mpc_at = -1;
	s.o.mark_at = -1;
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
	__u32 ack_seq;      /* network order */
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
	p->ack_seq = th.ack_seq;
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

/* A tuple for bpf_skc_lookup_tcp, from a packet arriving here (source = the peer). */
static __always_inline __u32 tuple_of(struct pkt *p, struct bpf_sock_tuple *t)
{
	if (p->v6) {
		__builtin_memcpy(t->ipv6.saddr, p->saddr, 16);
		__builtin_memcpy(t->ipv6.daddr, p->daddr, 16);
		t->ipv6.sport = p->sport;
		t->ipv6.dport = p->dport;
		return sizeof(t->ipv6);
	}
	__builtin_memcpy(&t->ipv4.saddr, p->saddr, 4);
	__builtin_memcpy(&t->ipv4.daddr, p->daddr, 4);
	t->ipv4.sport = p->sport;
	t->ipv4.dport = p->dport;
	return sizeof(t->ipv4);
}

/* Scratch space to read a request socket into (one per CPU). */
struct req_buf {
	__u8 bytes[1024];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct req_buf);
} req_scratch SEC(".maps");

/* The one kernel-internal field read here: the SYN-ACK's sequence number of a request
 * socket (CO-RE: relocated against the running kernel's BTF at load). */
struct tcp_request_sock___nena {
	__u32 snt_isn;
} __attribute__((preserve_access_index));

/* Whether this ACK completes a handshake the kernel knows: a request socket whose SYN-ACK
 * it acknowledges, or a valid SYN cookie of the listener. 1: yes; 2: the socket is
 * established already (a later segment: nothing to record); 0: no. */
static __always_inline int completes_handshake(struct __sk_buff *skb, struct pkt *p)
{
	struct bpf_sock_tuple t = {};
	__u32 tlen = tuple_of(p, &t);
	struct bpf_sock *sk = bpf_skc_lookup_tcp(skb, &t, tlen, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	int ok = 0;
	if (sk->state == BPF_TCP_NEW_SYN_RECV) {
		/* (bpf_skc_to_tcp_request_sock refuses an MPTCP subflow's request socket, whose
		 * sk_prot is MPTCP's override of tcp_prot: the field is read with
		 * bpf_probe_read_kernel
		 * through a per-CPU buffer: no arithmetic on a socket pointer is allowed) */
		__u32 zero = 0;
		__u32 off = bpf_core_field_offset(struct tcp_request_sock___nena, snt_isn);
		struct req_buf *b = bpf_map_lookup_elem(&req_scratch, &zero);
		if (b && off <= sizeof(b->bytes) - 4 &&
		    bpf_probe_read_kernel(b->bytes, (off & 0x3ff) + 4, sk) == 0) {
			__u32 isn;
			__builtin_memcpy(&isn, &b->bytes[off & 0x3ff], 4);
			if (isn == bpf_ntohl(p->ack_seq) - 1)
				ok = 1;
		}
	} else if (sk->state == BPF_TCP_LISTEN) {
		/* no request socket: a SYN cookie, if the listener sent cookies lately */
		__u8 ip[40] = {};
		struct tcphdr th;
		__u32 iplen = p->v6 ? 40 : 20;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, ip, iplen) == 0 &&
		    bpf_skb_load_bytes(skb, p->tcp_at, &th, sizeof(th)) == 0 &&
		    bpf_tcp_check_syncookie(sk, ip, iplen, &th, sizeof(th)) == 0)
			ok = 1;
	} else if (sk->state != BPF_TCP_CLOSE) {
		ok = 2;
	}
	bpf_sk_release(sk);
	return ok;
}

/* Server ingress, a non-SYN MP_CAPABLE packet with both keys: the completing ACK (or the
 * first data segment if that ACK was lost). Recorded in `established` if it completes a
 * handshake the kernel knows; a later one (the socket established) changes nothing. */
static __always_inline void record_established(struct __sk_buff *skb, struct pkt *p,
					       struct opts *o, struct mpc_flow_key *k,
					       __u32 port_flags)
{
	if (o->mpc_len < 20)
		return;
	__u8 keys[16];
	if (bpf_skb_load_bytes(skb, p->tcp_at + (__u32)o->mpc_at + 4, keys, 16))
		return;
	if (!(port_flags & PORT_NO_VERIFY)) {
		int c = completes_handshake(skb, p);
		if (c == 2)
			return;
		if (c == 0) {
			count(7);
			return;
		}
	} else if (bpf_map_lookup_elem(&established, k)) {
		return; /* (test runs: the first one counts) */
	}
	struct mpc_flow nf = {};
	nf.born = bpf_ktime_get_ns();
	__builtin_memcpy(nf.remote_key, keys, 8);
	__builtin_memcpy(nf.local_key, keys + 8, 8);
	nf.flags = F_MPC_SYN | F_MPC_SYNACK | F_LOCAL_KEY | F_REMOTE_KEY;
	/* The confirmation says the client asked and saw the consent (which only this host's
	 * egress adds, and only after a request): the handshake record is not needed, and may
	 * be gone (a SYN flood). Without it, what the handshake record says, for the reason. */
	if (o->marked) {
		nf.flags |= F_REQUESTED | F_CONSENTED | F_CONFIRMED;
		count(6);
	} else {
		struct mpc_flow *f = bpf_map_lookup_elem(&flows, k);
		if (f)
			nf.flags |= f->flags & (F_REQUESTED | F_CONSENTED | F_MARK_FAILED);
	}
	/* BPF_ANY: a live handshake on a 4-tuple whose old entry was never read replaces it */
	if (bpf_map_update_elem(&established, k, &nf, BPF_ANY)) {
		count(7);
		return;
	}
	count(4);
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
	__u32 role = cfg->role, method = cfg->method, port_flags = cfg->flags;
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
		nf.born = bpf_ktime_get_ns();
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

	if (!syn && !egress && role == MPC_ROLE_SERVER) {
		record_established(skb, &p, &o, &k, port_flags);
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
	if (o.mpc_len < 20)
		return TC_ACT_UNSPEC;
	__u8 keys[16];
	if (bpf_skb_load_bytes(skb, key_at, keys, 16))
		return TC_ACT_UNSPEC;
	if (egress && role == MPC_ROLE_CLIENT) {
		if ((f->flags & (F_LOCAL_KEY | F_REMOTE_KEY)) == (F_LOCAL_KEY | F_REMOTE_KEY))
			return TC_ACT_UNSPEC;
		__builtin_memcpy(f->local_key, keys, 8);
		__builtin_memcpy(f->remote_key, keys + 8, 8);
		__u32 add = F_LOCAL_KEY | F_REMOTE_KEY;
		/* The confirmation: only on a bare ACK (the third ACK), only after a consent. */
		if ((f->flags & F_CONSENTED) && !(f->flags & F_CONFIRMED) &&
		    p.total == p.ip_hl + p.doff) {
			if (method == MPC_METHOD_OPTION && add_option(skb, &p) == 0) {
				add |= F_CONFIRMED;
				count(6);
			} else {
				add |= F_MARK_FAILED;
				count(5);
			}
		}
		__sync_fetch_and_or(&f->flags, add);
		count(4);
	}
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

/* tc_mpc_strip: the lab's box on the trusted path that removes nena's option (for the tests
 * that show kato-mpc failing closed; never attached by the tools). On the packets `which`
 * names, of the port `port` (either end; 0: any), it overwrites the option (kind 253, ExID
 * MPC_EXID) with four NOPs, as option-normalising middleboxes do, and fixes the TCP
 * checksum; everything else passes unchanged. */
#define STRIP_SYN 0x01
#define STRIP_SYNACK 0x02
#define STRIP_ACK 0x04

struct strip_state {
	__u32 which;    /* STRIP_* */
	__u16 port;     /* host order, 0: any */
	__u16 pad;
	__u64 stripped; /* options overwritten */
	__u64 seen;     /* marked packets of the kinds in `which` */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strip_state);
} strip SEC(".maps");

SEC("tc")
int tc_mpc_strip(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct strip_state *st = bpf_map_lookup_elem(&strip, &zero);
	struct pkt p = {};
	struct opts o;

	if (!st || parse(skb, &p))
		return TC_ACT_UNSPEC;
	if (st->port && bpf_ntohs(p.sport) != st->port && bpf_ntohs(p.dport) != st->port)
		return TC_ACT_UNSPEC;
	__u32 kind = (p.flags & TCPF_SYN) ? ((p.flags & TCPF_ACK) ? STRIP_SYNACK : STRIP_SYN)
					  : STRIP_ACK;
	if (!(st->which & kind))
		return TC_ACT_UNSPEC;
	parse_opts(skb, p.tcp_at, p.doff, &o);
	if (!o.marked || o.mark_at < 0)
		return TC_ACT_UNSPEC;
	__sync_fetch_and_add(&st->seen, 1);
	if (o.mark_at & 1)
		return TC_ACT_UNSPEC; /* the checksum words pair differently: left (counted) */
	__u32 at = p.tcp_at + (__u32)o.mark_at;
	__u8 old[4];
	__u8 nops[4] = {TCPOPT_NOP, TCPOPT_NOP, TCPOPT_NOP, TCPOPT_NOP};
	if (bpf_skb_load_bytes(skb, at, old, 4))
		return TC_ACT_UNSPEC;
	__u16 o1, o2, n1, n2;
	__builtin_memcpy(&o1, old, 2);
	__builtin_memcpy(&o2, old + 2, 2);
	__builtin_memcpy(&n1, nops, 2);
	__builtin_memcpy(&n2, nops + 2, 2);
	if (bpf_skb_store_bytes(skb, at, nops, 4, 0) ||
	    bpf_l4_csum_replace(skb, p.tcp_at + 16, o1, n1, 2) ||
	    bpf_l4_csum_replace(skb, p.tcp_at + 16, o2, n2, 2))
		return TC_ACT_UNSPEC;
	__sync_fetch_and_add(&st->stripped, 1);
	return TC_ACT_UNSPEC;
}
