/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena policy chains: types shared by the BPF programs and (mirrored by hand, with size
 * checks) by the Rust loader in src/abi.rs. Keep the two in step. */
#ifndef NENA_H
#define NENA_H

#define NENA_MAX_LINKS 16 /* links per chain (power of two: used as a mask) */
#define NENA_MAX_CHAINS 64 /* chain slots */
#define NENA_NO_CHAIN 0xffffffffu
#define NENA_MAGIC 0x4e
#define NENA_FAST_IFINDEX 1024 /* interfaces below this index: hook_slots (array), else hooks */

/* tenants (a cgroup v2 or a uid, see tenant.h): ids 1 .. NENA_MAX_TENANTS - 1; 0 = no tenant.
 * A tenant's chain of a hook is in `tenant_hooks`, keyed by struct hook_key with
 * hook = NENA_HOOK_* | tenant << NENA_TENANT_SHIFT. */
#define NENA_MAX_TENANTS 16
#define NENA_TENANT_SHIFT 8
#define NENA_CGROUP_DEPTH 16 /* cgroup levels looked at for a tenant (the socket's and its ancestors) */

/* hooks */
#define NENA_HOOK_XDP 0 /* ingress */
#define NENA_HOOK_TC 1  /* egress */

/* program indices in the jump tables (user space fills both tables) */
enum nena_prog {
	P_SUBFLOW = 0,
	P_IP_PAIR,
	P_SRC,
	P_DST,
	P_SEQUENCE,
	P_PACKET_TYPE,
	P_RATE_LIMIT,
	P_SET_BACKUP,
	P_BLK_SUBFLOW,
	P_ADD_SUBFLOW,
	P_GET_CONNECT,
	P_GET_SUBFLOW,
	P_RECORD,
	P_DROP,
	P_COUNT,
};

/* packet-type bits, computed once by the dispatcher */
#define T_SYN (1u << 0)     /* SYN without ACK */
#define T_SYNACK (1u << 1)  /* SYN with ACK */
#define T_FIN (1u << 2)
#define T_RST (1u << 3)
#define T_DATA (1u << 4)     /* TCP payload present */
#define T_PURE_ACK (1u << 5) /* ACK, no payload, no SYN/FIN/RST */
#define T_MPTCP (1u << 7)    /* any MPTCP option */
#define T_MP_CAPABLE (1u << 8)
#define T_MP_JOIN (1u << 9)
#define T_DSS (1u << 10)
#define T_ADD_ADDR (1u << 11) /* announcement (E = 0) */
#define T_RM_ADDR (1u << 12)
#define T_MP_PRIO (1u << 13)
#define T_MP_FAIL (1u << 14)
#define T_MP_FASTCLOSE (1u << 15)
#define T_MP_TCPRST (1u << 16)
#define T_DATA_ACK (1u << 20)
#define T_DATA_FIN (1u << 21)
#define T_ADD_ADDR_ECHO (1u << 22)
#define T_DSS_MAP (1u << 23)
#define T_IPV6 (1u << 29)
#define T_IPOPTS (1u << 30)    /* IPv4 options or IPv6 extension headers */
#define T_MALFORMED (1u << 31) /* TCP options did not parse: actors leave the packet alone */

/* Per-packet context: XDP metadata (ingress) or skb->cb[0..3] (egress). 16 bytes. */
struct nena_ctx {
	__u32 types;
	__u16 l4_off;  /* TCP header offset from the start of the frame */
	__u16 pay_len; /* TCP payload length (from the IP header) */
	__u16 chain;   /* chain slot being run */
	__u8 l3_off;
	__u8 doff; /* TCP header length in bytes */
	__u8 pos;  /* link being run */
	__u8 m;    /* running match value of the selectors */
	__u8 hook;
	__u8 magic;
	__u8 tcp_flags; /* byte 13 of the TCP header */
	__u8 pad[3];
};

/* A TCP flow as seen in one packet. IPv4 addresses in the first 4 bytes. 40 bytes. */
struct flow_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport; /* network byte order */
	__u16 dport; /* network byte order */
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
} __attribute__((aligned(8))); /* 8: the packet is copied into it a word at a time */

/* An IPv4 flow as the key of the per-flow maps (`*4`): 12 bytes, where struct flow_key
 * (the key of the IPv6 maps, `*6`) takes 40. The kernel hashes and compares every byte of a
 * key, and those lookups were a third of a chain's time. */
struct flow4 {
	__u8 saddr[4];
	__u8 daddr[4];
	__u16 sport; /* network byte order */
	__u16 dport; /* network byte order */
};

/* arguments of each program, 40 bytes at most */
struct a_prefix { /* src, dst */
	__u8 addr[16];
	__u8 plen;
	__u8 family;
};
struct a_sequence {
	__u64 lo;
	__u64 hi;
	__u8 what; /* SEQ_* */
};
#define SEQ_DATA_SEQ 0
#define SEQ_DATA_ACK 1
#define SEQ_SUBFLOW_SEQ 2
#define SEQ_SUBFLOW_ACK 3
struct a_packet_type {
	__u32 all;  /* every one of these bits */
	__u32 any;  /* at least one of these (if non-zero) */
	__u32 none; /* none of these */
};
struct a_rate_limit {
	__u32 window; /* cap on the advertised window, bytes (unscaled) */
};
struct a_set_backup {
	__u8 backup; /* B flag value */
	__u8 repeat; /* how many MP_PRIO to send per subflow and value */
};

#define OP_AND 0
#define OP_OR 1
#define KIND_SELECTOR 0
#define KIND_ACTOR 1

struct link {
	__u8 prog; /* enum nena_prog */
	__u8 kind;
	__u8 op;       /* selectors: OP_AND / OP_OR */
	__u8 new_rule; /* selectors: the first selector after an actor starts from "true" */
	__u8 negate;   /* selectors: invert the result */
	__u8 pad[3];
	union {
		__u8 raw[40];
		struct flow_key flow; /* subflow, ip_pair (ports ignored) */
		struct a_prefix prefix;
		struct a_sequence seq;
		struct a_packet_type pt;
		struct a_rate_limit rl;
		struct a_set_backup sb;
	} a;
}; /* 48 bytes */

struct chain {
	__u32 len;
	__u32 gen;
	char name[24];
	struct link links[NENA_MAX_LINKS];
}; /* 32 + 768 = 800 bytes */

struct hook_key {
	__u32 ifindex;
	__u32 hook;
};

/* What user space knows of a tenant id (`tenants` array; the programs do not read it). */
#define TENANT_FREE 0
#define TENANT_CGROUP 1
#define TENANT_UID 2
struct tenant_info {
	char name[24];
	__u64 cgroup; /* cgroup v2 id (TENANT_CGROUP) */
	__u32 uid;    /* TENANT_UID */
	__u8 kind;    /* TENANT_* */
	__u8 pad[3];
	char what[64]; /* as the file gave it: the cgroup path, truncated */
}; /* 104 bytes */

struct link_stats {
	__u64 runs;
	__u64 hits; /* selectors: matched; actors: acted */
};

/* kept ADD_ADDR options (blk_subflow), per subflow as seen on the wire */
#define KEPT_SLOTS 4
struct kept_slot {
	__u8 len; /* 0: free */
	__u8 id;
	__u8 reannounced;
	__u8 blocked; /* how many (re)transmissions were blocked, saturating */
	__u8 opt[32];
};
struct kept {
	struct kept_slot slot[KEPT_SLOTS];
};

/* What the programs keep of a flow (one direction of a subflow as seen on the wire), one
 * entry of `flows4` / `flows6`: the window scale of its SYN (or SYN/ACK), which the
 * dispatcher records, and set_backup's MP_PRIO. In one entry so that set_backup finds the
 * entry the handshake made instead of inserting one of its own: the insert, into a cold part
 * of a large map, was most of its cost (docs/BENCHMARKS.md). A SYN starts the entry afresh. */
#define WS_NONE 0xff    /* the SYN offered no window scale */
#define WS_UNKNOWN 0xfe /* eff: the other side's SYN not seen (yet) */
#define WS_UNSEEN 0xfd  /* offered: the handshake was not seen (an entry set_backup made) */
struct flow_state {
	__u8 offered; /* shift offered by the SYN */
	__u8 eff;     /* the shift in force for this flow's windows, once both SYNs were seen */
	__u8 backup;  /* set_backup: the B flag of the MP_PRIO sent ... */
	__u8 sent;    /* ... and how many times (0: none) */
};

/* per-CPU counters */
#define CNT_SEEN 0      /* + hook: TCP packets that reached a chain lookup */
#define CNT_MALFORMED 2 /* + hook: TCP packets whose header or options did not parse */

struct metrics {
	__u64 pkts;
	__u64 bytes;   /* IP bytes */
	__u64 payload; /* TCP payload bytes: the flow size so far */
	__u64 first_ns;
	__u64 last_ns;
	__u32 ts_val; /* pending RTT sample: TSval sent ... */
	__u32 rtt_us; /* last RTT sample */
	__u64 ts_ns;  /* ... and when */
	__u32 srtt_us;
	__u32 samples;
};

#define EV_CONNECT 1
#define EV_SUBFLOW 2
#define EV_RECORD 3

struct event {
	__u32 type;
	__u32 ifindex;
	__u64 ts_ns;
	struct flow_key flow;
	__u8 hook;
	__u8 stage; /* connect: 1 SYN, 2 SYN/ACK, 3 ACK; subflow: same */
	__u8 flags; /* MP_CAPABLE / MP_JOIN flags byte (subtype low nibble / B) */
	__u8 nkeys; /* connect: keys present; subflow: 1 if token present */
	__u8 addr_id;
	__u8 version;
	__u8 pad[2];
	__u8 key_a[8]; /* connect: sender's key; subflow: token (4) + nonce (4) */
	__u8 key_b[8]; /* connect: receiver's key; subflow: truncated HMAC (SYN/ACK) */
	struct metrics m; /* record */
};

#endif
