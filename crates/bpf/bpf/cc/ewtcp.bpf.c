/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena_ewtcp: Equally-Weighted TCP as the LTE study's Algorithm 2 (002, Alg. 2): per ACK on
 * path P, CW_P += alpha / CW_P with alpha = 1/sqrt(n) packets, n the number of subflows;
 * halve on loss. As a "+1 per w ACKs" step: w = cwnd_P * sqrt(n) (sqrt(n) * 256 from a
 * table, n <= 8). Slow start and undo as Reno. */
#include "cc.h"

char _license[] SEC("license") = "GPL";

/* round(sqrt(n) * 256), n = 0..8 (model.rs: SQRT_N_256) */
static const __u32 sqrt_n_256[NENA_MAX_SUBFLOWS + 1] = {256, 256, 362, 443, 512, 572, 627, 677, 724};

static __always_inline __u32 ewtcp_w(const struct view *v)
{
	__u32 n = v->n > NENA_MAX_SUBFLOWS ? NENA_MAX_SUBFLOWS : v->n;
	__u64 w = ((__u64)v->me_cwnd * sqrt_n_256[n]) >> 8;

	return w ? (__u32)w : 1;
}

SEC("struct_ops")
void BPF_PROG(ewtcp_init, struct sock *sk)
{
}

SEC("struct_ops")
__u32 BPF_PROG(ewtcp_ssthresh, struct sock *sk)
{
	return reno_ssthresh(tcp_sk(sk));
}

SEC("struct_ops")
void BPF_PROG(ewtcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
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
	cong_avoid_ai(tp, ewtcp_w(&v), acked);
}

SEC("struct_ops")
__u32 BPF_PROG(ewtcp_undo_cwnd, struct sock *sk)
{
	return reno_undo(tcp_sk(sk));
}

SEC(".struct_ops.link")
struct tcp_congestion_ops nena_ewtcp = {
	.init = (void *)ewtcp_init,
	.ssthresh = (void *)ewtcp_ssthresh,
	.cong_avoid = (void *)ewtcp_cong_avoid,
	.undo_cwnd = (void *)ewtcp_undo_cwnd,
	.name = "nena_ewtcp",
	.flags = NENA_CC_FLAGS,
};
