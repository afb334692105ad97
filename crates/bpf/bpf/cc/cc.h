/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* cc.h: what the four coupled congestion controls of nena share (crates/cc).
 *
 * Kernel types: a minimal, checked-in set of just the fields these programs read or write,
 * each struct marked preserve_access_index, so libbpf relocates every offset against the
 * running kernel's BTF at load time (CO-RE). The build therefore needs neither bpftool nor
 * the build host's /sys/kernel/btf/vmlinux (the same reason crates/policy uses UAPI headers
 * only), and the object is the same on every build host. struct_ops matches
 * `tcp_congestion_ops` members by name, so the local type lists only the ops we set.
 *
 * Coupling: a subflow's socket reaches its MPTCP connection through icsk_ulp_data
 * (struct mptcp_subflow_context) -> conn (the MPTCP socket) -> conn_list, the list of
 * subflow contexts. The walk is bounded (NENA_MAX_SUBFLOWS) and reads every other
 * subflow's cwnd, smoothed RTT and private state with BPF_CORE_READ (probe reads): these are
 * unlocked snapshots of sockets whose own locks we do not hold, so a value may be one ACK
 * old or, while a subflow is being torn down, stale; the arithmetic below never divides by
 * a value it has not checked and clamps every input, so a torn read changes one increase
 * step, never the program's safety. A socket that is not an MPTCP subflow (plain TCP with
 * this congestion control) sees only itself, and every algorithm then reduces to Reno.
 *
 * Arithmetic: integer only, the same operations as crates/cc/src/model.rs (which the unit
 * tests check against each paper's formula in floating point). RTTs are used relative to
 * the smallest RTT of the connection (q = rtt * 1024 / rtt_min), which the formulas allow
 * because each is invariant under scaling every RTT by one factor.
 */
#ifndef NENA_CC_H
#define NENA_CC_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define NENA_MAX_SUBFLOWS 8
#define NENA_CWND_MAX (1u << 20)   /* cwnd clamp for the arithmetic (packets) */
#define NENA_Q_MAX (1u << 24)      /* largest relative RTT (x1024): a ratio of 16384 */
#define NENA_FRAC_SHIFT 20         /* fractional cwnd accumulator: 2^-20 packets */
#define TCP_ESTABLISHED 1
#define TCP_INFINITE_SSTHRESH 0x7fffffff

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)
struct list_head {
	struct list_head *next;
	struct list_head *prev;
};
struct sock_common {
	unsigned char skc_state;
};
struct sock {
	struct sock_common __sk_common;
};
struct tcp_congestion_ops;
struct inet_connection_sock {
	const struct tcp_congestion_ops *icsk_ca_ops;
	void *icsk_ulp_data;
	__u64 icsk_ca_priv[13];
};
struct tcp_sock {
	__u32 snd_cwnd;
	__u8 is_cwnd_limited : 1;
	__u32 snd_ssthresh;
	__u32 srtt_us;
	__u32 max_packets_out;
	__u32 snd_cwnd_cnt;
	__u32 snd_cwnd_clamp;
	__u32 prior_cwnd;
};
struct mptcp_subflow_context {
	struct list_head node;
	struct sock *tcp_sock;
	struct sock *conn;
};
struct mptcp_sock {
	struct list_head conn_list;
};
struct ack_sample;
struct rate_sample;
#pragma clang attribute pop

/* The ops this crate sets; libbpf matches them to the kernel's struct by name. */
struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	char name[16];
	__u32 flags;
};

/* TCP_CONG_NON_RESTRICTED: a network namespace other than the initial one may make it its
 * default (net.ipv4.tcp_congestion_control; the scenarios set it per host), and it is in
 * tcp_allowed_congestion_control (unprivileged sockets may choose it). */
#define NENA_CC_FLAGS 0x1

/* One subflow as the arithmetic sees it. */
struct sub {
	__u32 cwnd;  /* packets, clamped to [1, NENA_CWND_MAX] */
	__u32 rtt;   /* smoothed RTT, microseconds, >= 1 */
	__u32 l;     /* OLIA: packets between losses (max of the last two intervals, <= 2^32-1) */
	__u32 valid; /* this slot holds a subflow */
};

/* Every loop over the slots is unrolled with constant indices: a variable index into the
 * stack would make the verifier track each index exactly and explore every combination
 * (OLIA went past the 1M-instruction limit that way). Slots may have holes (valid = 0);
 * the order of the valid ones is conn_list's, as model.rs takes them. Once filled, the view
 * is copied onto itself with bpf_probe_read_kernel, which leaves its bytes as they are but
 * makes the verifier forget their exact values: the arithmetic after it is then verified
 * once, not once per combination of subflow slots the walk could have filled. */
struct view {
	struct sub s[NENA_MAX_SUBFLOWS];
	__u32 n;       /* valid slots, >= 1 */
	__u32 me;      /* slot of the calling subflow */
	__u32 me_cwnd; /* its cwnd (clamped) */
};

/* Private state in icsk_ca_priv (OLIA, BALIA): a signed fractional accumulator. */
struct priv {
	__s64 acc;    /* 2^-20 packets */
	__u64 l_cur;  /* packets acked since the last loss */
	__u64 l_prev; /* packets acked between the two losses before */
};

static __always_inline struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct priv *priv_of(struct sock *sk)
{
	return (struct priv *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline __u32 clamp_cwnd(__u32 c)
{
	if (c < 1)
		return 1;
	if (c > NENA_CWND_MAX)
		return NENA_CWND_MAX;
	return c;
}

static __always_inline __u32 rtt_of(__u32 srtt_us)
{
	__u32 r = srtt_us >> 3;
	return r ? r : 1;
}

static __always_inline __u32 l_of(const struct priv *p)
{
	__u64 l = p->l_cur > p->l_prev ? p->l_cur : p->l_prev;

	return l > 0xffffffffull ? 0xffffffffu : (__u32)l;
}

/* The calling subflow alone: plain TCP, or before the walk finds anything. */
static __always_inline void view_self(struct sock *sk, struct view *v, int with_l)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct priv *p = priv_of(sk);

	int i;

#pragma unroll
	for (i = 1; i < NENA_MAX_SUBFLOWS; i++)
		v->s[i].valid = 0;
	v->n = 1;
	v->me = 0;
	v->me_cwnd = clamp_cwnd(tp->snd_cwnd);
	v->s[0].valid = 1;
	v->s[0].cwnd = v->me_cwnd;
	v->s[0].rtt = rtt_of(tp->srtt_us);
	v->s[0].l = 0;
	if (with_l)
		v->s[0].l = l_of(p);
}

/* Fill `v` with every established subflow of sk's MPTCP connection (sk itself with its own,
 * locked values). with_l: also read the other subflows' OLIA loss intervals, only from
 * subflows that run the same congestion control (the same icsk_ca_ops). */
static __always_inline void view_walk(struct sock *sk, struct view *v, int with_l)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct mptcp_subflow_context *ctx;
	struct mptcp_sock *msk;
	struct list_head *pos, *head;
	__u64 ctx_addr, my_ops;
	int i, found = 0;

	view_self(sk, v, with_l);
	ctx_addr = (__u64)icsk->icsk_ulp_data;
	if (!ctx_addr)
		return;
	/* The list links the contexts by their first member. */
	if (bpf_core_field_offset(struct mptcp_subflow_context, node) != 0)
		return;
	ctx = (struct mptcp_subflow_context *)ctx_addr;
	/* Another ULP's data would not point back at this socket. */
	if ((__u64)BPF_CORE_READ(ctx, tcp_sock) != (__u64)sk)
		return;
	msk = (struct mptcp_sock *)BPF_CORE_READ(ctx, conn);
	if (!msk)
		return;
	head = &msk->conn_list;
	pos = BPF_CORE_READ(msk, conn_list.next);
	my_ops = (__u64)BPF_CORE_READ(icsk, icsk_ca_ops);
	v->n = 0;
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++)
		v->s[i].valid = 0;
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++) {
		struct mptcp_subflow_context *c = (struct mptcp_subflow_context *)pos;
		struct sock *ssk;
		struct tcp_sock *stp;
		struct inet_connection_sock *sicsk;
		__u32 srtt, cw;

		if (!pos || pos == head)
			break;
		ssk = BPF_CORE_READ(c, tcp_sock);
		stp = (struct tcp_sock *)ssk;
		sicsk = (struct inet_connection_sock *)ssk;
		pos = BPF_CORE_READ(pos, next);
		if (!ssk)
			continue;
		if (ssk == sk) {
			struct priv *p = priv_of(sk);

			v->me = i;
			v->s[i].valid = 1;
			v->s[i].cwnd = v->me_cwnd;
			v->s[i].rtt = rtt_of(tcp_sk(sk)->srtt_us);
			v->s[i].l = 0;
			if (with_l)
				v->s[i].l = l_of(p);
			v->n++;
			found = 1;
			continue;
		}
		if (BPF_CORE_READ(ssk, __sk_common.skc_state) != TCP_ESTABLISHED)
			continue;
		srtt = BPF_CORE_READ(stp, srtt_us);
		cw = BPF_CORE_READ(stp, snd_cwnd);
		if (!srtt || !cw)
			continue;
		v->s[i].valid = 1;
		v->s[i].cwnd = clamp_cwnd(cw);
		v->s[i].rtt = rtt_of(srtt);
		v->s[i].l = 0;
		if (with_l && (__u64)BPF_CORE_READ(sicsk, icsk_ca_ops) == my_ops) {
			/* icsk_ca_priv[1], [2]: struct priv's l_cur, l_prev */
			__u64 lc = BPF_CORE_READ(sicsk, icsk_ca_priv[1]);
			__u64 lp = BPF_CORE_READ(sicsk, icsk_ca_priv[2]);

			lc = lc > lp ? lc : lp;
			v->s[i].l = lc > 0xffffffffull ? 0xffffffffu : (__u32)lc;
		}
		v->n++;
	}
	/* The walk did not see the caller (list changing under us): use it alone. */
	if (!found)
		view_self(sk, v, with_l);
}

static __always_inline void view_conn(struct sock *sk, struct view *v, int with_l)
{
	view_walk(sk, v, with_l);
	bpf_probe_read_kernel(v, sizeof(*v), v);
}

/* ---- Reno parts (slow start, AI step, halving, undo) ---- */

/* As the kernel's tcp_slow_start: returns the ACKed packets left over past ssthresh. */
static __always_inline __u32 slow_start(struct tcp_sock *tp, __u32 acked)
{
	__u32 cwnd = tp->snd_cwnd + acked;

	if (cwnd > tp->snd_ssthresh)
		cwnd = tp->snd_ssthresh;
	acked -= cwnd - tp->snd_cwnd;
	tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
	return acked;
}

/* As the kernel's tcp_cong_avoid_ai: +1 packet per `w` ACKed packets. */
static __always_inline void cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked)
{
	if (w < 1)
		w = 1;
	if (tp->snd_cwnd_cnt >= w) {
		tp->snd_cwnd_cnt = 0;
		tp->snd_cwnd++;
	}
	tp->snd_cwnd_cnt += acked;
	if (tp->snd_cwnd_cnt >= w) {
		__u32 delta = tp->snd_cwnd_cnt / w;

		tp->snd_cwnd_cnt -= delta * w;
		tp->snd_cwnd += delta;
	}
	if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
}

/* Fractional increase (OLIA, BALIA): `inc` in 2^-20 packets per ACKed packet, signed. */
static __always_inline void cong_avoid_frac(struct sock *sk, __s64 inc, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct priv *p = priv_of(sk);
	__s64 one = 1ll << NENA_FRAC_SHIFT;

	p->acc += inc * (__s64)acked;
	if (p->acc >= one) {
		__u64 add = (__u64)p->acc >> NENA_FRAC_SHIFT;

		p->acc &= one - 1;
		if (add > NENA_CWND_MAX)
			add = NENA_CWND_MAX;
		tp->snd_cwnd += (__u32)add;
		if (tp->snd_cwnd > tp->snd_cwnd_clamp)
			tp->snd_cwnd = tp->snd_cwnd_clamp;
	} else if (p->acc <= -one) {
		p->acc = 0;
		if (tp->snd_cwnd > 2)
			tp->snd_cwnd--;
	}
}

static __always_inline int in_slow_start(struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* As the kernel's tcp_is_cwnd_limited. */
static __always_inline int cwnd_limited(struct tcp_sock *tp)
{
	if (in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

static __always_inline __u32 reno_ssthresh(struct tcp_sock *tp)
{
	__u32 h = tp->snd_cwnd >> 1;

	return h > 2 ? h : 2;
}

static __always_inline __u32 reno_undo(struct tcp_sock *tp)
{
	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

/* ---- the shared fixed-point quantities (model.rs: Fixed) ---- */

/* a_i = cwnd_i / r'_i * 2^16 and b_i = cwnd_i / r'_i^2 * 2^16, r'_i = rtt_i / rtt_min. */
struct sums {
	__u64 a_sum; /* sum of a_i */
	__u64 a_max; /* max of a_i (BALIA's max x) */
	__u64 b_max; /* max of b_i (LIA) */
	__u64 a_me;
	__u64 b_me;
	__u64 c_best, q_best; /* cwnd and q of the subflow of largest a (BALIA's alpha) */
	__u64 c_me, q_me;
};

/* Copy a variable onto itself so the verifier forgets its exact value (see struct view):
 * used at the top of each unrolled iteration on the accumulators, so the paths through one
 * iteration's branches meet again at the next instead of multiplying. */
#define forget(x) bpf_probe_read_kernel(&(x), sizeof(x), &(x))

static __always_inline void sums_of(const struct view *v, struct sums *out)
{
	__u32 rmin = 0xffffffff;
	int i;

	out->a_sum = out->a_max = out->b_max = out->a_me = out->b_me = 0;
	out->c_best = out->c_me = 0;
	out->q_best = out->q_me = 1024;
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++) {
		forget(rmin);
		if (!v->s[i].valid)
			continue;
		if (v->s[i].rtt < rmin)
			rmin = v->s[i].rtt;
	}
	forget(rmin);
	if (rmin < 1)
		rmin = 1;
#pragma unroll
	for (i = 0; i < NENA_MAX_SUBFLOWS; i++) {
		__u64 q, c, a, b;

		forget(*out);
		if (!v->s[i].valid)
			continue;
		q = ((__u64)v->s[i].rtt << 10) / rmin;
		if (q < 1024)
			q = 1024;
		if (q > NENA_Q_MAX)
			q = NENA_Q_MAX;
		c = v->s[i].cwnd;
		a = (c << 26) / q;
		b = (c << 36) / (q * q);
		out->a_sum += a;
		if (a > out->a_max) {
			out->a_max = a;
			out->c_best = c;
			out->q_best = q;
		}
		if (b > out->b_max)
			out->b_max = b;
		if (i == v->me) {
			out->a_me = a;
			out->b_me = b;
			out->c_me = c;
			out->q_me = q;
		}
	}
	forget(*out);
}

/* (b_me / a_sum^2) * factor / 1024 in 2^-20 packets: the w_r/rtt_r^2 / (sum w/rtt)^2 term
 * of OLIA (factor 1024) and BALIA (its (1+alpha)/2 (4+alpha)/5, x1024), multiplied before
 * the last division so that a small term times a large factor keeps its precision.
 * t = c_me * 2^62 / (q_me^2 a_sum), computed from c_me and q_me rather than the coarser b_me
 * (a long RTT leaves b_me few bits); t <= 2^26 (b_i / a_i = 1 / r'_i <= 1), so t * factor
 * fits for factor < 2^37. */
static __always_inline __u64 coupled_term(const struct sums *s, __u64 factor)
{
	__u64 u, t;

	if (!s->a_sum || !s->q_me)
		return 0;
	u = (s->c_me << 36) / s->q_me;
	u = (u << 16) / s->q_me;
	t = (u << 10) / s->a_sum;
	return t * factor / s->a_sum;
}

#endif
