/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* run: `nena run`, nena for applications that know nothing of it.
 *
 * Attached to one cgroup (v2), the one `nena run` puts its command in:
 *
 * - cgroup/connect4, cgroup/connect6 (nena_run_c4, nena_run_c6): every TCP connect of the
 *   cgroup to a non-loopback destination is rewritten to the local nena proxy (127.0.0.1 or
 *   ::1, ports from `run_cfg`); the original destination is kept in `run_cookie`, keyed by
 *   the socket's cookie (bpf_get_socket_cookie). Loopback and unspecified destinations are
 *   left alone (local services stay local). An IPv6 connect when the proxy has no IPv6
 *   listener is refused (EPERM), never sent around nena. TCP to port 53 is redirected even to
 *   loopback (a stub resolver such as 127.0.0.53 would resolve outside nena): the proxy answers
 *   it from the DNS responder.
 * - UDP, in cgroup/connect4/6 and cgroup/sendmsg4/6 (nena_run_c4/c6, nena_run_s4/s6): a
 *   datagram to port 53 (any address, loopback too) goes to `nena run`'s DNS responder
 *   (127.0.0.1 or ::1, ports `dns4`/`dns6`); any other datagram to a non-loopback address
 *   goes to its datagram relay (`udp4`/`udp6`), or is refused (EPERM) when `udp_block` is
 *   set or the relay has no socket of that family. The original destination is kept in
 *   `run_udp` by socket cookie; cgroup/recvmsg4/6 (nena_run_r4/r6) put it back as the
 *   source of what the responder or the relay answers, so the application takes the answer.
 * - cgroup_skb/egress (nena_run_eg): the backstop. Every packet of the cgroup to a
 *   non-loopback destination is dropped and counted (IPv4, IPv6, any protocol: raw and ICMP
 *   sockets, anything the hooks above let through); nothing of the command leaves by an
 *   interface outside nena. For a datagram to the relay it records which original
 *   destination the datagram's source (address, port) stands for (`run_relay`), read by
 *   the relay when the datagram arrives. `nena run`'s own sockets are outside the cgroup.
 * - sockops (nena_run_so): at BPF_SOCK_OPS_TCP_CONNECT_CB (the SYN is about to leave, the
 *   local port is chosen) the entry moves from `run_cookie` to `run_orig`, keyed by the
 *   socket's local address and port: exactly what the proxy sees as its peer when it
 *   accepts the connection, so it can look the original destination up (and delete it).
 * - fmod_ret/update_socket_protocol (nena_run_mp, `nena run --mptcp-only`): what
 *   mptcpize does, with BPF (the kernel selftest progs/mptcpify.c): a TCP socket created by
 *   a task of the cgroup (bpf_get_current_cgroup_id) becomes an MPTCP socket. This hook is
 *   global, so the cgroup id in `run_cfg` is the filter.
 * - cgroup/connect_unix, cgroup/sendmsg_unix (nena_run_cu, nena_run_su): a connect (or a
 *   datagram) of the cgroup to an AF_UNIX path in `run_unix` is refused (EPERM): the sockets
 *   of the resolvers outside nena (systemd-resolved's varlink socket, nscd's, avahi's, the
 *   D-Bus system bus unless allowed), which would look CMD's names up by the WLAN's
 *   resolver. `nena run` also hides them in CMD's mount namespace; this is the second layer
 *   (a socket recreated after CMD started, a root CMD that unmounts). The path is read from
 *   the kernel's copy of the address (CO-RE: struct bpf_sock_addr_kern, kernel 6.7+).
 *
 * The cgroup programs are attached with BPF_PROG_ATTACH (not links): they stay attached to
 * the cgroup until `nena run` detaches them or the cgroup is removed, so CMD's processes
 * never run unredirected, not even after `nena run` was killed (then the proxy's ports are
 * closed and the egress program drops the rest: no network until its watchdog kills them).
 */
#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define ETH_P_IP_ 0x0800
#define ETH_P_IPV6_ 0x86DD
#define DNS_PORT 53
#define IPPROTO_MPTCP_ 262

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Written by user space before attaching. Addresses and ports in network order. */
struct run_cfg {
	__u64 cgroup_id;  /* the cgroup of --mptcp-only */
	__u32 proxy4;     /* 127.0.0.1 */
	__u32 proxy6[4];  /* ::1 */
	__u16 port4;      /* 0: no IPv4 listener (IPv4 connects refused) */
	__u16 port6;      /* 0: no IPv6 listener (IPv6 connects refused) */
	__u16 dns4;       /* the DNS responder on proxy4 (0: none: DNS over UDP refused) */
	__u16 dns6;       /* the DNS responder on proxy6 (0: none) */
	__u16 udp4;       /* the datagram relay on proxy4 (0: none: datagrams refused) */
	__u16 udp6;       /* the datagram relay on proxy6 (0: none) */
	__u32 udp_block;  /* 1: every datagram but DNS refused (--udp block) */
	__u32 pad;
};

/* A destination: IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d). Port in network order. */
struct run_dst {
	__u8 addr[16];
	__u16 port;
	__u16 pad;
};

/* The client socket as the proxy sees its peer: IPv4 as mapped, port in host order. */
struct run_peer {
	__u8 addr[16];
	__u16 port;
	__u16 pad;
};

/* Counters: 0 redirected, 1 left alone (loopback), 2 refused, 3 handed to the proxy
 * (sockops), 4 sockets made MPTCP, 5 DNS datagrams or connects sent to the responder,
 * 6 datagrams or connects sent to the relay, 7 datagrams or connects refused, 8 packets
 * dropped at egress, 9 AF_UNIX connects or datagrams to a resolver's path refused. */
#define RUN_STATS 10
#define ST_DNS 5
#define ST_UDP 6
#define ST_UDP_REFUSED 7
#define ST_DROPPED 8
#define ST_UNIX_REFUSED 9

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct run_cfg);
} run_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct run_dst);
} run_cookie SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct run_peer);
	__type(value, struct run_dst);
} run_orig SEC(".maps");

/* UDP sockets redirected to the responder or the relay: their last original destination,
 * by socket cookie (recvmsg puts it back as the answer's source). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct run_dst);
} run_udp SEC(".maps");

/* Datagrams to the relay: the original destination by the datagram's source as the relay
 * sees it (address mapped, port in host order). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct run_peer);
	__type(value, struct run_dst);
} run_relay SEC(".maps");

/* An AF_UNIX path refused to the cgroup: the path's bytes, zero-padded (sun_path's size). */
struct run_unix_path {
	char path[108];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct run_unix_path);
	__type(value, __u8);
} run_unix SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RUN_STATS);
	__type(key, __u32);
	__type(value, __u64);
} run_stats SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&run_stats, &i);
	if (v)
		*v += 1;
}

static __always_inline int is_tcp(struct bpf_sock_addr *ctx)
{
	return ctx->type == SOCK_STREAM &&
	       (ctx->protocol == IPPROTO_TCP_ || ctx->protocol == IPPROTO_MPTCP_);
}

static __always_inline int is_udp(struct bpf_sock_addr *ctx)
{
	return ctx->type == SOCK_DGRAM && (ctx->protocol == IPPROTO_UDP_ || ctx->protocol == 0);
}

static __always_inline void remember(struct bpf_sock_addr *ctx, struct run_dst *d)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&run_cookie, &cookie, d, BPF_ANY);
	count(0);
}

static __always_inline void remember_udp(struct bpf_sock_addr *ctx, struct run_dst *d)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&run_udp, &cookie, d, BPF_ANY);
}

/* A UDP connect or sendmsg of an IPv4 socket: to the responder (port 53), left alone
 * (loopback), to the relay, or refused (return 0: EPERM). */
static __always_inline int udp4(struct bpf_sock_addr *ctx, struct run_cfg *cfg)
{
	__u32 dst = ctx->user_ip4;
	__u16 port = (__u16)ctx->user_port;
	__u32 h = bpf_ntohl(dst);
	__u16 to;
	int stat;
	if (port == bpf_htons(DNS_PORT)) {
		to = cfg->dns4;
		stat = ST_DNS;
	} else if ((h >> 24) == 127 || h == 0) {
		count(1);
		return 1;
	} else {
		to = cfg->udp_block ? 0 : cfg->udp4;
		stat = ST_UDP;
	}
	if (!to) {
		count(ST_UDP_REFUSED);
		return 0;
	}
	struct run_dst d = {};
	d.addr[10] = 0xff;
	d.addr[11] = 0xff;
	__builtin_memcpy(&d.addr[12], &dst, 4);
	d.port = port;
	remember_udp(ctx, &d);
	count(stat);
	ctx->user_ip4 = cfg->proxy4;
	ctx->user_port = to;
	return 1;
}

/* The same for an IPv6 socket (IPv4-mapped destinations go to the IPv4 sockets). */
static __always_inline int udp6(struct bpf_sock_addr *ctx, struct run_cfg *cfg)
{
	__u32 a0 = *(volatile __u32 *)&ctx->user_ip6[0];
	__u32 a1 = *(volatile __u32 *)&ctx->user_ip6[1];
	__u32 a2 = *(volatile __u32 *)&ctx->user_ip6[2];
	__u32 a3 = *(volatile __u32 *)&ctx->user_ip6[3];
	__u16 port = (__u16)ctx->user_port;
	int mapped = a0 == 0 && a1 == 0 && a2 == bpf_htonl(0xffff);
	int local = (a0 == 0 && a1 == 0 && a2 == 0 && (a3 == 0 || a3 == bpf_htonl(1))) ||
		    (mapped && ((bpf_ntohl(a3) >> 24) == 127 || a3 == 0));
	__u16 to;
	int stat;
	if (port == bpf_htons(DNS_PORT)) {
		to = mapped ? cfg->dns4 : cfg->dns6;
		stat = ST_DNS;
	} else if (local) {
		count(1);
		return 1;
	} else {
		to = cfg->udp_block ? 0 : (mapped ? cfg->udp4 : cfg->udp6);
		stat = ST_UDP;
	}
	if (!to) {
		count(ST_UDP_REFUSED);
		return 0;
	}
	struct run_dst d = {};
	__builtin_memcpy(&d.addr[0], &a0, 4);
	__builtin_memcpy(&d.addr[4], &a1, 4);
	__builtin_memcpy(&d.addr[8], &a2, 4);
	__builtin_memcpy(&d.addr[12], &a3, 4);
	d.port = port;
	remember_udp(ctx, &d);
	count(stat);
	if (mapped) {
		ctx->user_ip6[3] = cfg->proxy4;
	} else {
		ctx->user_ip6[0] = cfg->proxy6[0];
		ctx->user_ip6[1] = cfg->proxy6[1];
		ctx->user_ip6[2] = cfg->proxy6[2];
		ctx->user_ip6[3] = cfg->proxy6[3];
	}
	ctx->user_port = to;
	return 1;
}

SEC("cgroup/connect4")
int nena_run_c4(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg)
		return 1;
	if (is_udp(ctx))
		return udp4(ctx, cfg);
	if (!is_tcp(ctx))
		return 1;
	__u32 dst = ctx->user_ip4;
	__u32 h = bpf_ntohl(dst);
	if (((h >> 24) == 127 || h == 0) && (__u16)ctx->user_port != bpf_htons(DNS_PORT)) {
		count(1);
		return 1;
	}
	if (!cfg->port4) {
		count(2);
		return 0;
	}
	struct run_dst d = {};
	d.addr[10] = 0xff;
	d.addr[11] = 0xff;
	__builtin_memcpy(&d.addr[12], &dst, 4);
	d.port = (__u16)ctx->user_port;
	remember(ctx, &d);
	ctx->user_ip4 = cfg->proxy4;
	ctx->user_port = cfg->port4;
	return 1;
}

SEC("cgroup/connect6")
int nena_run_c6(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg)
		return 1;
	if (is_udp(ctx))
		return udp6(ctx, cfg);
	if (!is_tcp(ctx))
		return 1;
	int dns = (__u16)ctx->user_port == bpf_htons(DNS_PORT);
	__u32 a0 = *(volatile __u32 *)&ctx->user_ip6[0];
	__u32 a1 = *(volatile __u32 *)&ctx->user_ip6[1];
	__u32 a2 = *(volatile __u32 *)&ctx->user_ip6[2];
	__u32 a3 = *(volatile __u32 *)&ctx->user_ip6[3];
	int mapped = a0 == 0 && a1 == 0 && a2 == bpf_htonl(0xffff);
	if (!dns && a0 == 0 && a1 == 0 && a2 == 0 && (a3 == 0 || a3 == bpf_htonl(1))) {
		count(1); /* :: or ::1 */
		return 1;
	}
	if (!dns && mapped && ((bpf_ntohl(a3) >> 24) == 127 || a3 == 0)) {
		count(1);
		return 1;
	}
	if ((mapped && !cfg->port4) || (!mapped && !cfg->port6)) {
		count(2);
		return 0;
	}
	struct run_dst d = {};
	__builtin_memcpy(&d.addr[0], &a0, 4);
	__builtin_memcpy(&d.addr[4], &a1, 4);
	__builtin_memcpy(&d.addr[8], &a2, 4);
	__builtin_memcpy(&d.addr[12], &a3, 4);
	d.port = (__u16)ctx->user_port;
	remember(ctx, &d);
	if (mapped) {
		/* a dual-stack socket toward IPv4: the IPv4 listener, as ::ffff:127.0.0.1 */
		ctx->user_ip6[3] = cfg->proxy4;
		ctx->user_port = cfg->port4;
	} else {
		ctx->user_ip6[0] = cfg->proxy6[0];
		ctx->user_ip6[1] = cfg->proxy6[1];
		ctx->user_ip6[2] = cfg->proxy6[2];
		ctx->user_ip6[3] = cfg->proxy6[3];
		ctx->user_port = cfg->port6;
	}
	return 1;
}

SEC("cgroup/sendmsg4")
int nena_run_s4(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg || !is_udp(ctx))
		return 1;
	return udp4(ctx, cfg);
}

SEC("cgroup/sendmsg6")
int nena_run_s6(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg || !is_udp(ctx))
		return 1;
	return udp6(ctx, cfg);
}

/* An answer from the responder or the relay: its source becomes the socket's original
 * destination. (recvmsg programs cannot refuse: they return 1.) */
SEC("cgroup/recvmsg4")
int nena_run_r4(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg || ctx->user_ip4 != cfg->proxy4)
		return 1;
	__u16 port = (__u16)ctx->user_port;
	if (!port || (port != cfg->dns4 && port != cfg->udp4))
		return 1;
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct run_dst *d = bpf_map_lookup_elem(&run_udp, &cookie);
	if (!d)
		return 1;
	__u32 a;
	__builtin_memcpy(&a, &d->addr[12], 4);
	ctx->user_ip4 = a;
	ctx->user_port = d->port;
	return 1;
}

SEC("cgroup/recvmsg6")
int nena_run_r6(struct bpf_sock_addr *ctx)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg)
		return 1;
	__u32 a0 = *(volatile __u32 *)&ctx->user_ip6[0];
	__u32 a1 = *(volatile __u32 *)&ctx->user_ip6[1];
	__u32 a2 = *(volatile __u32 *)&ctx->user_ip6[2];
	__u32 a3 = *(volatile __u32 *)&ctx->user_ip6[3];
	__u16 port = (__u16)ctx->user_port;
	int from4 = a0 == 0 && a1 == 0 && a2 == bpf_htonl(0xffff) && a3 == cfg->proxy4 &&
		    port && (port == cfg->dns4 || port == cfg->udp4);
	int from6 = a0 == cfg->proxy6[0] && a1 == cfg->proxy6[1] && a2 == cfg->proxy6[2] &&
		    a3 == cfg->proxy6[3] && port && (port == cfg->dns6 || port == cfg->udp6);
	if (!from4 && !from6)
		return 1;
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct run_dst *d = bpf_map_lookup_elem(&run_udp, &cookie);
	if (!d)
		return 1;
	__u32 b0, b1, b2, b3;
	__builtin_memcpy(&b0, &d->addr[0], 4);
	__builtin_memcpy(&b1, &d->addr[4], 4);
	__builtin_memcpy(&b2, &d->addr[8], 4);
	__builtin_memcpy(&b3, &d->addr[12], 4);
	ctx->user_ip6[0] = b0;
	ctx->user_ip6[1] = b1;
	ctx->user_ip6[2] = b2;
	ctx->user_ip6[3] = b3;
	ctx->user_port = d->port;
	return 1;
}

/* A datagram to the relay: which original destination its source stands for. */
static __always_inline void relay_record(struct __sk_buff *skb, struct run_peer *p)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct run_dst *d = bpf_map_lookup_elem(&run_udp, &cookie);
	if (!d)
		return;
	struct run_dst copy = *d;
	bpf_map_update_elem(&run_relay, p, &copy, BPF_ANY);
}

SEC("cgroup_skb/egress")
int nena_run_eg(struct __sk_buff *skb)
{
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg)
		return 0;
	if (skb->protocol == bpf_htons(ETH_P_IP_)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			goto drop;
		if ((bpf_ntohl(ip.daddr) >> 24) != 127)
			goto drop;
		if (ip.protocol == IPPROTO_UDP_ && cfg->udp4 && ip.daddr == cfg->proxy4) {
			__u16 ports[2];
			if (!bpf_skb_load_bytes(skb, ip.ihl * 4, ports, sizeof(ports)) &&
			    ports[1] == cfg->udp4) {
				struct run_peer p = {};
				p.addr[10] = 0xff;
				p.addr[11] = 0xff;
				__builtin_memcpy(&p.addr[12], &ip.saddr, 4);
				p.port = bpf_ntohs(ports[0]);
				relay_record(skb, &p);
			}
		}
		return 1;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6_)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			goto drop;
		__u32 d0, d1, d2, d3;
		__builtin_memcpy(&d0, &ip6.daddr.in6_u.u6_addr8[0], 4);
		__builtin_memcpy(&d1, &ip6.daddr.in6_u.u6_addr8[4], 4);
		__builtin_memcpy(&d2, &ip6.daddr.in6_u.u6_addr8[8], 4);
		__builtin_memcpy(&d3, &ip6.daddr.in6_u.u6_addr8[12], 4);
		if (!(d0 == 0 && d1 == 0 && d2 == 0 && d3 == bpf_htonl(1)))
			goto drop;
		if (ip6.nexthdr == IPPROTO_UDP_ && cfg->udp6) {
			__u16 ports[2];
			if (!bpf_skb_load_bytes(skb, sizeof(ip6), ports, sizeof(ports)) &&
			    ports[1] == cfg->udp6) {
				struct run_peer p = {};
				__builtin_memcpy(&p.addr[0], &ip6.saddr, 16);
				p.port = bpf_ntohs(ports[0]);
				relay_record(skb, &p);
			}
		}
		return 1;
	}
drop:
	count(ST_DROPPED);
	return 0;
}

SEC("sockops")
int nena_run_so(struct bpf_sock_ops *skops)
{
	if (skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB)
		return 1;
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct run_dst *d = bpf_map_lookup_elem(&run_cookie, &cookie);
	if (!d)
		return 1;
	struct run_dst copy = *d;
	struct run_peer p = {};
	if (skops->family == AF_INET) {
		__u32 l = skops->local_ip4;
		p.addr[10] = 0xff;
		p.addr[11] = 0xff;
		__builtin_memcpy(&p.addr[12], &l, 4);
	} else {
		/* one 32-bit load each: the verifier refuses the 64-bit load clang would merge */
		__u32 l0 = *(volatile __u32 *)&skops->local_ip6[0];
		__u32 l1 = *(volatile __u32 *)&skops->local_ip6[1];
		__u32 l2 = *(volatile __u32 *)&skops->local_ip6[2];
		__u32 l3 = *(volatile __u32 *)&skops->local_ip6[3];
		__builtin_memcpy(&p.addr[0], &l0, 4);
		__builtin_memcpy(&p.addr[4], &l1, 4);
		__builtin_memcpy(&p.addr[8], &l2, 4);
		__builtin_memcpy(&p.addr[12], &l3, 4);
	}
	p.port = (__u16)skops->local_port;
	bpf_map_update_elem(&run_orig, &p, &copy, BPF_ANY);
	bpf_map_delete_elem(&run_cookie, &cookie);
	count(3);
	return 1;
}

/* The kernel's context behind struct bpf_sock_addr (CO-RE: relocated against the running
 * kernel's BTF; only the fields read here). */
struct bpf_sock_addr_kern {
	void *uaddr;
	__u32 uaddrlen;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

/* 1: the AF_UNIX address of this connect or sendmsg is not in `run_unix`; 0: refused. An
 * abstract or unnamed address (no path) never matches. */
static __always_inline int unix_allowed(struct bpf_sock_addr *ctx)
{
	struct bpf_sock_addr_kern *k = bpf_cast_to_kern_ctx(ctx);
	__u32 len = k->uaddrlen;
	if (len <= 2) /* offsetof(struct sockaddr_un, sun_path) */
		return 1;
	__u32 n = len - 2;
	if (n > sizeof(((struct run_unix_path *)0)->path) - 1)
		n = sizeof(((struct run_unix_path *)0)->path) - 1;
	struct run_unix_path key = {};
	/* up to the first NUL; the rest of the key stays zero */
	if (bpf_probe_read_kernel_str(key.path, n + 1, (char *)k->uaddr + 2) < 0)
		return 1;
	if (!bpf_map_lookup_elem(&run_unix, &key))
		return 1;
	count(ST_UNIX_REFUSED);
	return 0;
}

SEC("cgroup/connect_unix")
int nena_run_cu(struct bpf_sock_addr *ctx)
{
	return unix_allowed(ctx);
}

SEC("cgroup/sendmsg_unix")
int nena_run_su(struct bpf_sock_addr *ctx)
{
	return unix_allowed(ctx);
}

/* int update_socket_protocol(int family, int type, int protocol) */
SEC("fmod_ret/update_socket_protocol")
int nena_run_mp(unsigned long long *ctx)
{
	int family = (int)ctx[0];
	int type = (int)ctx[1];
	int protocol = (int)ctx[2];
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg || bpf_get_current_cgroup_id() != cfg->cgroup_id)
		return protocol;
	/* the type may carry SOCK_NONBLOCK / SOCK_CLOEXEC */
	if ((family == AF_INET || family == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP_)) {
		count(4);
		return IPPROTO_MPTCP_;
	}
	return protocol;
}
