/* goroutine-text.h: a Go program's goroutines as Go users read them (a traceback's format), identical ones grouped
 * as panicparse does, and what many of them wait on or were created by summed up. */
#pragma once

#include <stdio.h>

#include "model/snapshot.h"

/* The goroutines of S (S->go set): a summary, then each group of goroutines with the same stack, state, wait reason
 * and creator, the longest waiting first, then the largest. Process-supplied strings escaped. */
void goroutines_print_text(const Snapshot *s, FILE *f);
/* One line per goroutine: "go:REASON;outermost;…;innermost 1". */
void goroutines_print_folded(const Snapshot *s, FILE *f);
/* "37 goroutines [chan receive, 5 minutes] in main.worker (main.go:12)": the largest group blocked a minute or
 * more (else the largest that waits), and its own innermost frame; *RET NULL when S has no goroutines waiting.
 * -ENOMEM. */
int goroutines_summary(const Snapshot *s, char **ret);
/* The stack of that group (innermost first, the runtime's own frames in it): where a Go program is stuck, for its
 * signature; *RET NULL when no goroutine waits or its stack was not read. -ENOMEM. */
int goroutines_stuck_stack(const Snapshot *s, const GoStack **ret);
