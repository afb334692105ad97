/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* Tenants: which tenant a packet belongs to, so that the dispatcher can run that tenant's
 * chain instead of the hook's default one. A tenant is a cgroup (v2) or a uid.
 *
 * Egress (TC): the packet's socket tells: its cgroup v2 (bpf_skb_cgroup_id, then its
 * ancestors, the deepest tenant wins), else its uid. MPTCP subflow sockets, joins included,
 * carry the cgroup of the MPTCP socket (the kernel's mptcp_attach_cgroup), but a join's own
 * uid is 0: the uid is read from the MPTCP socket (bpf_skc_to_mptcp_sock), see socket_uid
 * (both tested: tests/tenants.rs, crates/cli/tests/policy_tenants.rs). The answer is kept per flow
 * in an LRU map (`tenant_flows4/6`), computed again on every SYN and SYN/ACK (a 4-tuple
 * reused by another socket) and on a miss.
 * Ingress (XDP): no socket yet; the flow's tenant is what egress learnt for the reverse
 * flow. A flow whose first packet arrives before any leaves (a connection to a local
 * listener, before its SYN/ACK) has no tenant until then: it gets the default chain. */
#ifndef NENA_TENANT_H
#define NENA_TENANT_H

#include "common.h"

/* [0]: the number of tenants defined; 0 = no tenancy (the dispatcher skips all of this) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tenant_cfg SEC(".maps");

/* cgroup v2 id -> tenant */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NENA_MAX_TENANTS);
	__type(key, __u64);
	__type(value, __u32);
} tenant_cgroups SEC(".maps");

/* uid -> tenant */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NENA_MAX_TENANTS);
	__type(key, __u32);
	__type(value, __u32);
} tenant_uids SEC(".maps");

/* (ifindex, hook | tenant << 8) -> chain slot */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct hook_key);
	__type(value, __u32);
} tenant_hooks SEC(".maps");

/* tenant id -> name and definition, for user space */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NENA_MAX_TENANTS);
	__type(key, __u32);
	__type(value, struct tenant_info);
} tenants SEC(".maps");

/* flow as seen at egress -> tenant (0: none) */
FLOW_MAPS(tenant_flows, __u32, 65536)

/* The one kernel-internal field the programs read: `sk_uid` of the MPTCP socket a subflow
 * belongs to (CO-RE: its offset is relocated against the running kernel's BTF at load). */
struct sock___nena {
	struct {
		__u32 val;
	} sk_uid;
} __attribute__((preserve_access_index));

/* The uid a packet's socket belongs to (-1: no socket). A subflow of an MPTCP connection
 * counts as its MPTCP socket's: the kernel creates join subflows itself (path manager), so
 * their own sk_uid is 0 (measured on 6.18: tests/tenants.rs), while the MPTCP socket has the
 * uid of the process that made it. */
static __always_inline __u32 socket_uid(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return (__u32)-1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return (__u32)-1;
	struct mptcp_sock *msk = bpf_skc_to_mptcp_sock(sk);
	if (msk) {
		struct sock___nena *s = (void *)msk;
		return s->sk_uid.val;
	}
	return bpf_get_socket_uid(skb);
}

static __always_inline __u32 tenant_of_socket(struct __sk_buff *skb)
{
	__u32 *t;
	__u64 id = bpf_skb_cgroup_id(skb);
	if (id) {
		t = bpf_map_lookup_elem(&tenant_cgroups, &id);
		if (t)
			return *t;
		/* an ancestor: the deepest one that is a tenant (level 0 is the root) */
		__u32 found = 0;
		for (int lvl = 0; lvl < NENA_CGROUP_DEPTH; lvl++) {
			__u64 a = bpf_skb_ancestor_cgroup_id(skb, lvl);
			if (a == 0 || a == id)
				break;
			t = bpf_map_lookup_elem(&tenant_cgroups, &a);
			if (t)
				found = *t;
		}
		if (found)
			return found;
	}
	__u32 uid = socket_uid(skb);
	if (uid == (__u32)-1)
		return 0;
	t = bpf_map_lookup_elem(&tenant_uids, &uid);
	return t ? *t : 0;
}

static __always_inline __u32 tenant_egress(struct __sk_buff *ctx, const struct nena_ctx *c,
					   const int v6)
{
	struct flow_key fk;
	if (get_flow(ctx, 1, c, &fk))
		return 0;
	__u32 *cached = FLOW_LOOKUP(tenant_flows, v6, &fk);
	if (cached && !(c->tcp_flags & TCPF_SYN))
		return *cached;
	__u32 t = tenant_of_socket(ctx);
	if (!cached || *cached != t)
		FLOW_UPDATE(tenant_flows, v6, &fk, &t, BPF_ANY);
	return t;
}

static __always_inline __u32 tenant_ingress(struct xdp_md *ctx, const struct nena_ctx *c,
					    const int v6)
{
	struct flow_key fk, rk;
	if (get_flow(ctx, 0, c, &fk))
		return 0;
	flow_reverse(&fk, &rk);
	__u32 *t = FLOW_LOOKUP(tenant_flows, v6, &rk);
	return t ? *t : 0;
}

/* The tenant of a packet, one global function per hook (verified once, on its own). */
__noinline int tenant_tc(struct __sk_buff *ctx, const struct nena_ctx *c)
{
	if (!ctx || !c)
		return 0;
	if (c->types & T_IPV6)
		return tenant_egress(ctx, c, 1);
	return tenant_egress(ctx, c, 0);
}

__noinline int tenant_xdp(struct xdp_md *ctx, const struct nena_ctx *c)
{
	if (!ctx || !c)
		return 0;
	if (c->types & T_IPV6)
		return tenant_ingress(ctx, c, 1);
	return tenant_ingress(ctx, c, 0);
}

/* The chain slot of (ifindex, hook) for the packet's tenant, or `slot` (the hook's default
 * chain) if tenancy is off, the packet has no tenant, or its tenant has no chain there. */
static __always_inline __u32 tenant_slot(void *ctx, const int tc, const struct nena_ctx *c,
					 __u32 ifindex, __u32 slot)
{
	__u32 zero = 0;
	__u32 *n = bpf_map_lookup_elem(&tenant_cfg, &zero);
	if (!n || *n == 0)
		return slot;
	__u32 t = tc ? tenant_tc(ctx, c) : tenant_xdp(ctx, c);
	if (t == 0 || t >= NENA_MAX_TENANTS)
		return slot;
	struct hook_key k = {.ifindex = ifindex, .hook = c->hook | (t << NENA_TENANT_SHIFT)};
	__u32 *s = bpf_map_lookup_elem(&tenant_hooks, &k);
	return s ? *s : slot;
}

#endif
