/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* nena policy chains: one object holding the dispatchers (xdp_nena, tc_nena), one program per
 * selector and per actor for each hook, and the maps they share. */
#include "common.h"
#include "dispatch.h"
#include "selectors.h"
#include "actors.h"
