/* stackctl-output.h: what stackctl's output does on a terminal (a pager, colour) and how it writes JSON. */
#pragma once

#include <json-c/json.h>

#include "render/render.h"

/* On a terminal, unless --no-pager: pipe stdout into $STACKCTL_PAGER, $PAGER or "less" (LESS=FRSXMK unless set),
 * until pager_close(), which waits for it. A pager of "" or "cat" is none. */
void pager_open(void);
void pager_close(void);
/* ANSI SGR sequences when arg.colour, "" otherwise. */
const char *ansi_bold(void);
const char *ansi_class(const char *klass);      /* red for blocked, yellow for busy-loop and syscall-spin */
const char *ansi_normal(void);
/* O as arg.json_flags say, with a newline; EXIT_OK or EXIT_FAIL. */
int json_print(json_object *o);

/* What the command line asks of a rendered snapshot (--kernel, --modules, --locks, --no-demangle, --no-group,
 * --json=pretty, --svg=PICTURE, --icicle), for snapshot_render() and its kin. */
RenderOptions render_options_from_args(void);
