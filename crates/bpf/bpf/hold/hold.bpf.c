/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* hold: the first-flight hold of the in-kernel path manager.
 *
 * With the in-kernel path manager the kernel opens subflows by itself (a `subflow` endpoint,
 * the server's ADD_ADDR), and may put a connection's first flight (the hello, with r_c) on
 * an untrusted one the moment it joins: on a link with a round trip of tens of microseconds
 * that is sooner than user space can close it. While a connection's first flight is not
 * acknowledged, nena holds it here: its token is in `holds`, with the interfaces it trusts.
 *
 * cgroup_skb/egress (nena_hold): a packet of an MPTCP subflow (its MPTCP socket found with
 * bpf_skc_to_mptcp_sock) whose connection is held, that carries TCP payload and leaves by an
 * interface not in the entry's trusted set, is dropped and counted in the entry. TCP keeps
 * the segment queued (the transmit failed); nena closes the subflow before it lets the
 * connection go (the gate's withdrawal), so the held bytes never leave by that interface.
 * Packets without payload (the join's handshake, ACKs, RST, FIN) pass: the join completes and
 * the gate sees it. Everything else passes untouched.
 *
 * Attached to the cgroup of the nena process: MPTCP subflows, joins opened by the kernel
 * included, carry the cgroup of their MPTCP socket (the kernel's mptcp_attach_cgroup).
 * Nothing is pinned: the link lives as long as the nena process's descriptor. */
#include "uapi.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_IP_ 0x0800
#define ETH_P_IPV6_ 0x86DD
#define IPPROTO_TCP_ 6
#define HOLD_IFACES 8

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The one kernel-internal field read: the MPTCP socket's local token (what MPTCP_INFO and the
 * path-manager events call the connection's token). CO-RE: relocated at load against the
 * running kernel's BTF. */
struct mptcp_sock___hold {
	__u32 token;
} __attribute__((preserve_access_index));

/* One held connection: the interfaces (indexes, 0 = unused slot) its payload may leave by,
 * and how many packets were dropped. */
struct hold {
	__u32 trusted[HOLD_IFACES];
	__u64 dropped;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct hold);
} holds SEC(".maps");

/* Bytes of TCP payload the packet carries (the skb starts at the network header; a GSO
 * packet counts whole); -1 when it is not TCP over IPv4/IPv6 without extension headers. */
static __always_inline long tcp_payload(struct __sk_buff *skb)
{
	__u32 l3;
	if (skb->protocol == bpf_htons(ETH_P_IP_)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return -1;
		if (ip.protocol != IPPROTO_TCP_)
			return -1;
		l3 = ip.ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6_)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			return -1;
		if (ip6.nexthdr != IPPROTO_TCP_)
			return -1;
		l3 = sizeof(ip6);
	} else {
		return -1;
	}
	struct tcphdr th;
	if (bpf_skb_load_bytes(skb, l3, &th, sizeof(th)))
		return -1;
	return (long)skb->len - l3 - th.doff * 4;
}

SEC("cgroup_skb/egress")
int nena_hold(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	struct mptcp_sock *msk = bpf_skc_to_mptcp_sock(sk);
	if (!msk)
		return 1;
	__u32 token = ((struct mptcp_sock___hold *)msk)->token;
	struct hold *h = bpf_map_lookup_elem(&holds, &token);
	if (!h)
		return 1;
	__u32 dev = skb->ifindex;
#pragma unroll
	for (int i = 0; i < HOLD_IFACES; i++)
		if (h->trusted[i] && h->trusted[i] == dev)
			return 1;
	/* Not TCP as parsed above (an extension header): held too, it is a subflow's packet. */
	long payload = tcp_payload(skb);
	if (payload == 0)
		return 1;
	__sync_fetch_and_add(&h->dropped, 1);
	return 0;
}
