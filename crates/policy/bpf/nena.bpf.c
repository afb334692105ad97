/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* nena policy chains: one object holding the dispatchers (xdp_nena, tc_nena), one program per
 * selector and per actor for each hook, and the maps they share. */
#include "common.h"
#include "dispatch.h"
#include "selectors.h"
#include "actors.h"
