// SPDX-License-Identifier: GPL-2.0
/* Confirms or refutes the mechanism in docs/investigations/kernel-41-bytes/README.md on a running kernel.
 *
 * fentry on __mptcp_finish_join(msk, ssk), which calls the inlined mptcp_subflow_joined()
 * that sets the subflow's map_seq to msk->ack_seq. If the subflow already holds a parsed
 * mapping (map_valid) whose map_seq differs from ack_seq, that assignment moves the mapping:
 * the misplacement the capture shows. Counters: 0 = joins finished, 1 = with a parsed
 * mapping, 2 = with a parsed mapping that the assignment moves (each also printed to
 * trace_pipe with both values).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} counts SEC(".maps");

static void bump(u32 key)
{
	u64 *v = bpf_map_lookup_elem(&counts, &key);

	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("fentry/__mptcp_finish_join")
int BPF_PROG(finish_join, struct mptcp_sock *msk, struct sock *ssk)
{
	struct inet_connection_sock *icsk = (void *)ssk;
	struct mptcp_subflow_context *sf = BPF_CORE_READ(icsk, icsk_ulp_data);
	u64 map_seq, ack_seq;

	bump(0);
	if (!sf || !BPF_CORE_READ_BITFIELD_PROBED(sf, map_valid))
		return 0;
	bump(1);
	map_seq = BPF_CORE_READ(sf, map_seq);
	ack_seq = BPF_CORE_READ(msk, ack_seq);
	if (map_seq != ack_seq) {
		bump(2);
		bpf_printk("nena-41: join mapping moved: map_seq=%llu ack_seq=%llu", map_seq, ack_seq);
	}
	return 0;
}
