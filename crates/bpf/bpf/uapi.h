/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* The kernel ABI the programs use: only UAPI types (struct __sk_buff, xdp_md, iphdr, ipv6hdr,
 * tcphdr, the map and program enums), from the system's UAPI headers (linux-libc-dev). The
 * programs read no kernel-internal structure but one field, `sk_uid` of an MPTCP socket
 * (tenant.h: declared locally, relocated by libbpf at load against the kernel's BTF), so they
 * need no vmlinux.h: the build does not depend on the build host's running kernel or its BTF. */
#ifndef NENA_UAPI_H
#define NENA_UAPI_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>

#endif
