/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena_olia: Opportunistic Linked Increases (Khalili, Gast, Popovic, Le Boudec, "MPTCP is
 * not Pareto-optimal", IEEE/ACM ToN 2013) as a BPF tcp_congestion_ops. Per ACKed packet on
 * path r, in congestion avoidance:
 *   w_r += (w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2 + alpha_r / w_r
 * where, with l_p the packets between the last two losses on p (max of the last two
 * intervals), B = argmax_p l_p / rtt_p^2 the presumed best paths, M the paths of largest
 * window and C = B \ M: alpha_r = 1/(n |C|) if r in C; -1/(n |M|) if r in M and C is not
 * empty; else 0. The increase goes to a signed 2^-20-packet accumulator (cc.h
 * cong_avoid_frac). Slow start, halving on loss and undo as Reno. */
#include "cc.h"

char _license[] SEC("license") = "GPL";

/* model.rs: olia_inc. 2^-20 packets per ACKed packet, signed. */
struct olia_acc {
	__u64 m[NENA_MAX_SUBFLOWS]; /* l / r'^2 * 2^10 */
	__u64 m_best;
	__u32 rmin, w_max, n_c, n_m;
	__u32 me_c, me_m;
};

static __always_inline __s64 olia_inc(const struct view *v)
{
	struct sums s;
	struct olia_acc x = {};
	__s64 inc;
	int i;

	sums_of(v, &s);
	x.rmin = 0xffffffff;
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++) {
		forget(x);
		if (!v->s[i].valid)
			continue;
		if (v->s[i].rtt < x.rmin)
			x.rmin = v->s[i].rtt;
		if (v->s[i].cwnd > x.w_max)
			x.w_max = v->s[i].cwnd;
	}
	forget(x);
	if (x.rmin < 1)
		x.rmin = 1;
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++) {
		__u64 q, l;

		forget(x);
		if (!v->s[i].valid)
			continue;
		q = ((__u64)v->s[i].rtt << 10) / x.rmin;
		if (q < 1024)
			q = 1024;
		if (q > NENA_Q_MAX)
			q = NENA_Q_MAX;
		l = v->s[i].l;
		x.m[i] = (l << 20) / ((q * q) >> 10);
		if (x.m[i] > x.m_best)
			x.m_best = x.m[i];
	}
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++) {
		__u32 in_m, in_c;

		forget(x);
		if (!v->s[i].valid)
			continue;
		in_m = v->s[i].cwnd == x.w_max;
		in_c = x.m[i] == x.m_best && !in_m;
		x.n_m += in_m;
		x.n_c += in_c;
		if (i == v->me) {
			x.me_m = in_m;
			x.me_c = in_c;
		}
	}
	forget(x);
	inc = (__s64)coupled_term(&s, 1024);
	if (x.me_c && x.n_c)
		inc += (__s64)((1ull << NENA_FRAC_SHIFT) / ((__u64)v->n * x.n_c * v->me_cwnd));
	else if (x.me_m && x.n_c && x.n_m)
		inc -= (__s64)((1ull << NENA_FRAC_SHIFT) / ((__u64)v->n * x.n_m * v->me_cwnd));
	return inc;
}

SEC("struct_ops")
void BPF_PROG(olia_init, struct sock *sk)
{
	struct priv *p = priv_of(sk);

	p->acc = 0;
	p->l_cur = 0;
	p->l_prev = 0;
}

SEC("struct_ops")
__u32 BPF_PROG(olia_ssthresh, struct sock *sk)
{
	struct priv *p = priv_of(sk);

	p->l_prev = p->l_cur;
	p->l_cur = 0;
	p->acc = 0;
	return reno_ssthresh(tcp_sk(sk));
}

SEC("struct_ops")
void BPF_PROG(olia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct priv *p = priv_of(sk);
	struct view v;

	p->l_cur += acked;
	if (!cwnd_limited(tp))
		return;
	if (in_slow_start(tp)) {
		acked = slow_start(tp, acked);
		if (!acked)
			return;
	}
	view_conn(sk, &v, 1);
	cong_avoid_frac(sk, olia_inc(&v), acked);
}

SEC("struct_ops")
__u32 BPF_PROG(olia_undo_cwnd, struct sock *sk)
{
	return reno_undo(tcp_sk(sk));
}

SEC(".struct_ops.link")
struct tcp_congestion_ops nena_olia = {
	.init = (void *)olia_init,
	.ssthresh = (void *)olia_ssthresh,
	.cong_avoid = (void *)olia_cong_avoid,
	.undo_cwnd = (void *)olia_undo_cwnd,
	.name = "nena_olia",
	.flags = NENA_CC_FLAGS,
};
