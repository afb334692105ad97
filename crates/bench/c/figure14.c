/*
 * The scrambling code of Kato et al., Figure 14 of the journal version
 * (shared/seeds/001, "Program code for scrambling"), as printed, so that
 * `nena bench codec` can time the papers' own C next to nena-codec.
 *
 * `struct mptcp_cb` stands in for the kernel's MPTCP control block and is
 * reached through `tp->mpcb` exactly as in the figure. Differences from the
 * printed text, all of them needed to compile or stated in the papers' prose:
 * - the figure writes `&tp->mpcb.mptcp_loc_key`; `mpcb` is a pointer, so `->`;
 * - the figure's scramble_init() computes the XOR of the buffer into `x` but the
 *   line storing it is missing; the prose says "the XOR result for all bytes in
 *   the send scramble buffer is stored in control variable tp->mpcb->sXor", so
 *   it is stored;
 * - `size t` is `size_t`.
 * The receive side (descramble_init/descramble) is not printed; it is the same
 * loop on the receive buffer (rScrBuf, rXor, rIndex) appending the recovered
 * (descrambled) byte, as the papers describe.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct mptcp_cb {
    unsigned long long mptcp_loc_key; /* the local key, 8 bytes */
    unsigned long long mptcp_rem_key; /* the remote key, 8 bytes */
    unsigned char sScrBuf[64];
    unsigned char sXor;
    int sIndex;
    int sFirst;
    unsigned char rScrBuf[64];
    unsigned char rXor;
    int rIndex;
    int rFirst;
};

struct tcp_sock {
    struct mptcp_cb *mpcb;
};

void scramble_init(struct tcp_sock *tp) {
    int i;
    unsigned char x;
    memset(tp->mpcb->sScrBuf, 0, 64);
    memcpy(&tp->mpcb->sScrBuf[56],
           &tp->mpcb->mptcp_loc_key, 8);
    for (i = 0, x = 0; i < 64; i++)
        x = x ^ tp->mpcb->sScrBuf[i];
    tp->mpcb->sXor = x; /* stated in the prose, missing from the printed figure */
    tp->mpcb->sIndex = 63;
    tp->mpcb->sFirst = 0;
    return;
}

void scramble(struct tcp_sock *tp,
              unsigned char *data, size_t len) {
    int i;
    unsigned char x;
    for (i = 0; i < len; i++) {
        x = data[i] ^ tp->mpcb->sXor;
        tp->mpcb->sIndex = (tp->mpcb->sIndex + 1) % 64;
        tp->mpcb->sXor = tp->mpcb->sXor
                         ^ tp->mpcb->sScrBuf[tp->mpcb->sIndex]
                         ^ data[i];
        tp->mpcb->sScrBuf[tp->mpcb->sIndex] = data[i];
        data[i] = x;
    }
    return;
}

/* The receive side, by symmetry (not printed in the papers). */
void descramble_init(struct tcp_sock *tp) {
    int i;
    unsigned char x;
    memset(tp->mpcb->rScrBuf, 0, 64);
    memcpy(&tp->mpcb->rScrBuf[56],
           &tp->mpcb->mptcp_rem_key, 8);
    for (i = 0, x = 0; i < 64; i++)
        x = x ^ tp->mpcb->rScrBuf[i];
    tp->mpcb->rXor = x;
    tp->mpcb->rIndex = 63;
    tp->mpcb->rFirst = 0;
    return;
}

void descramble(struct tcp_sock *tp,
                unsigned char *data, size_t len) {
    int i;
    unsigned char x;
    for (i = 0; i < len; i++) {
        x = data[i] ^ tp->mpcb->rXor;
        tp->mpcb->rIndex = (tp->mpcb->rIndex + 1) % 64;
        tp->mpcb->rXor = tp->mpcb->rXor
                         ^ tp->mpcb->rScrBuf[tp->mpcb->rIndex]
                         ^ x;
        tp->mpcb->rScrBuf[tp->mpcb->rIndex] = x;
        data[i] = x;
    }
    return;
}

/* Glue for the benchmark: one connection whose send side scrambles with
 * `loc_key` and whose receive side descrambles with `rem_key` (8 bytes each,
 * copied byte for byte into the keys, as the kernel's memcpy copies them). */
struct nena_fig14 {
    struct tcp_sock tp;
    struct mptcp_cb mpcb;
};

struct nena_fig14 *nena_fig14_new(const unsigned char loc_key[8],
                                  const unsigned char rem_key[8]) {
    struct nena_fig14 *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->tp.mpcb = &c->mpcb;
    memcpy(&c->mpcb.mptcp_loc_key, loc_key, 8);
    memcpy(&c->mpcb.mptcp_rem_key, rem_key, 8);
    c->mpcb.sFirst = 1;
    c->mpcb.rFirst = 1;
    scramble_init(&c->tp);
    descramble_init(&c->tp);
    return c;
}

void nena_fig14_free(struct nena_fig14 *c) { free(c); }

void nena_fig14_scramble(struct nena_fig14 *c, unsigned char *data, size_t len) {
    scramble(&c->tp, data, len);
}

void nena_fig14_descramble(struct nena_fig14 *c, unsigned char *data, size_t len) {
    descramble(&c->tp, data, len);
}
