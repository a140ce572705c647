/* stackctl-args.c: the parsed command line (see stackctl-args.h). */
#include "stackctl-args.h"

StackctlArgs arg;
