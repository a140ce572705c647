/* stackctl-dump.h: the symbolizer "stackctl dump" sets up from the options, which show --resymbolize uses too. */
#pragma once

#include "unwind/symbolize.h"

/* The symbolizer dump and show --resymbolize use, as the options say; logs and returns an exit status on failure. */
int symbolizer_from_args(Symbolizer **ret);
/* After the output: the debuginfo found elsewhere goes into the cache, for the next run. */
void symbolizer_done(Symbolizer *sym);
