/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena_balia: Balanced Linked Adaptation (Peng, Walid, Hwang, Low, "Multipath TCP:
 * Analysis, Design and Implementation", IEEE/ACM ToN 2016) as a BPF tcp_congestion_ops.
 * With x_k = w_k / rtt_k and alpha_r = max_k x_k / x_r, per ACKed packet on path r:
 *   w_r += x_r / (rtt_r (sum_k x_k)^2) * (1 + alpha_r)/2 * (4 + alpha_r)/5
 * and on a loss w_r -= w_r/2 * min(alpha_r, 1.5) (BALIA's own decrease, at least Reno's
 * halving; floor 2). Slow start and undo as Reno. */
#include "cc.h"

char _license[] SEC("license") = "GPL";

/* alpha_r = x_best / x_r = (c_best / q_best) / (c_r / q_r), in 2^-10, clamped to
 * [1, 16384] (model.rs: balia_alpha). c <= 2^20, q <= 2^24: c * q << 10 fits in 64 bits. */
static __always_inline __u64 balia_alpha(const struct sums *s)
{
	__u64 a, den = s->q_best * s->c_me;

	if (!den)
		return 1024;
	a = ((s->c_best * s->q_me) << 10) / den;
	if (a < 1024)
		a = 1024;
	if (a > (1u << 24))
		a = 1u << 24;
	return a;
}

/* model.rs: balia_inc. 2^-20 packets per ACKed packet. */
static __always_inline __s64 balia_inc(const struct view *v)
{
	struct sums s;
	__u64 alpha, factor;

	sums_of(v, &s);
	alpha = balia_alpha(&s);
	factor = (1024 + alpha) * (4096 + alpha) / 10240;
	return (__s64)coupled_term(&s, factor);
}

SEC("struct_ops")
void BPF_PROG(balia_init, struct sock *sk)
{
	struct priv *p = priv_of(sk);

	p->acc = 0;
	p->l_cur = 0;
	p->l_prev = 0;
}

/* model.rs: balia_ssthresh */
SEC("struct_ops")
__u32 BPF_PROG(balia_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct view v;
	struct sums s;
	__u64 m, w = tp->snd_cwnd, cut;

	priv_of(sk)->acc = 0;
	view_conn(sk, &v, 0);
	sums_of(&v, &s);
	m = balia_alpha(&s);
	if (m > 1536)
		m = 1536;
	cut = (w * m) >> 11;
	return w - cut > 2 ? (__u32)(w - cut) : 2;
}

SEC("struct_ops")
void BPF_PROG(balia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
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
	cong_avoid_frac(sk, balia_inc(&v), acked);
}

SEC("struct_ops")
__u32 BPF_PROG(balia_undo_cwnd, struct sock *sk)
{
	return reno_undo(tcp_sk(sk));
}

SEC(".struct_ops.link")
struct tcp_congestion_ops nena_balia = {
	.init = (void *)balia_init,
	.ssthresh = (void *)balia_ssthresh,
	.cong_avoid = (void *)balia_cong_avoid,
	.undo_cwnd = (void *)balia_undo_cwnd,
	.name = "nena_balia",
	.flags = NENA_CC_FLAGS,
};
