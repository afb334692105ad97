/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena_lia: RFC 6356's Linked Increases Algorithm as a BPF tcp_congestion_ops.
 * Per ACKed packet on subflow i, in congestion avoidance: cwnd_i += min(alpha / cwnd_total,
 * 1 / cwnd_i), alpha = cwnd_total * max_k(cwnd_k / rtt_k^2) / (sum_k cwnd_k / rtt_k)^2.
 * As a "+1 per w ACKs" step: w = max((sum a)^2 / max b, cwnd_i) (cc.h: a, b); slow start,
 * halving on loss and undo as Reno. */
#include "cc.h"

char _license[] SEC("license") = "GPL";

/* model.rs: lia_w */
static __always_inline __u32 lia_w(const struct view *v)
{
	struct sums s;
	__u64 a, b, w;
	__u32 mine = v->me_cwnd;
	int i;

	sums_of(v, &s);
	a = s.a_sum;
	b = s.b_max;
	for (i = 0; i < 32 && a > 0xffffffffull; i++) {
		a >>= 1;
		b >>= 2;
	}
	if (!b)
		return mine;
	w = (a * a / b) >> 16;
	if (w < mine)
		w = mine;
	if (w > 0xffffffffull)
		w = 0xffffffffull;
	return (__u32)w;
}

SEC("struct_ops")
void BPF_PROG(lia_init, struct sock *sk)
{
}

SEC("struct_ops")
__u32 BPF_PROG(lia_ssthresh, struct sock *sk)
{
	return reno_ssthresh(tcp_sk(sk));
}

SEC("struct_ops")
void BPF_PROG(lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct view v;

	if (!cwnd_limited(tp))
		return;
	if (in_slow_start(tp)) {
		acked = slow_start(tp, acked);
		if (!acked)
			return;
	}
	view_conn(sk, &v, 0);
	cong_avoid_ai(tp, lia_w(&v), acked);
}

SEC("struct_ops")
__u32 BPF_PROG(lia_undo_cwnd, struct sock *sk)
{
	return reno_undo(tcp_sk(sk));
}

SEC(".struct_ops.link")
struct tcp_congestion_ops nena_lia = {
	.init = (void *)lia_init,
	.ssthresh = (void *)lia_ssthresh,
	.cong_avoid = (void *)lia_cong_avoid,
	.undo_cwnd = (void *)lia_undo_cwnd,
	.name = "nena_lia",
	.flags = NENA_CC_FLAGS,
};
