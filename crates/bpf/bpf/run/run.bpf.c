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
 *   listener is refused (EPERM), never sent around nena.
 * - sockops (nena_run_so): at BPF_SOCK_OPS_TCP_CONNECT_CB (the SYN is about to leave, the
 *   local port is chosen) the entry moves from `run_cookie` to `run_orig`, keyed by the
 *   socket's local address and port: exactly what the proxy sees as its peer when it
 *   accepts the connection, so it can look the original destination up (and delete it).
 * - fmod_ret/update_socket_protocol (nena_run_mp, `nena run --mptcp-only`): what
 *   mptcpize does, with BPF (the kernel selftest progs/mptcpify.c): a TCP socket created by
 *   a task of the cgroup (bpf_get_current_cgroup_id) becomes an MPTCP socket. This hook is
 *   global, so the cgroup id in `run_cfg` is the filter.
 *
 * Nothing is pinned: the links live as long as the file descriptors of `nena run`.
 */
#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define IPPROTO_TCP_ 6
#define IPPROTO_MPTCP_ 262

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Written by user space before attaching. Addresses and ports in network order. */
struct run_cfg {
	__u64 cgroup_id;  /* the cgroup of --mptcp-only */
	__u32 proxy4;     /* 127.0.0.1 */
	__u32 proxy6[4];  /* ::1 */
	__u16 port4;      /* 0: no IPv4 listener (IPv4 connects refused) */
	__u16 port6;      /* 0: no IPv6 listener (IPv6 connects refused) */
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
 * (sockops), 4 sockets made MPTCP. */
#define RUN_STATS 5

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

static __always_inline void remember(struct bpf_sock_addr *ctx, struct run_dst *d)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	bpf_map_update_elem(&run_cookie, &cookie, d, BPF_ANY);
	count(0);
}

SEC("cgroup/connect4")
int nena_run_c4(struct bpf_sock_addr *ctx)
{
	if (!is_tcp(ctx))
		return 1;
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg)
		return 1;
	__u32 dst = ctx->user_ip4;
	__u32 h = bpf_ntohl(dst);
	if ((h >> 24) == 127 || h == 0) {
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
	if (!is_tcp(ctx))
		return 1;
	__u32 k = 0;
	struct run_cfg *cfg = bpf_map_lookup_elem(&run_cfg, &k);
	if (!cfg)
		return 1;
	__u32 a0 = *(volatile __u32 *)&ctx->user_ip6[0];
	__u32 a1 = *(volatile __u32 *)&ctx->user_ip6[1];
	__u32 a2 = *(volatile __u32 *)&ctx->user_ip6[2];
	__u32 a3 = *(volatile __u32 *)&ctx->user_ip6[3];
	int mapped = a0 == 0 && a1 == 0 && a2 == bpf_htonl(0xffff);
	if (a0 == 0 && a1 == 0 && a2 == 0 && (a3 == 0 || a3 == bpf_htonl(1))) {
		count(1); /* :: or ::1 */
		return 1;
	}
	if (mapped && ((bpf_ntohl(a3) >> 24) == 127 || a3 == 0)) {
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
