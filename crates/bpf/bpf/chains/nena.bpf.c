/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena policy chains: one object holding the dispatchers (xdp_nena, tc_nena), one program per
 * actor for each hook (selectors run inline, see chain.h), and the maps they share. */
#include "common.h"
#include "dispatch.h"
#include "actors.h"
