/* runtime-symbols.c: a runtime's module found by the symbols it exports (see runtime-symbols.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "runtime/runtime-symbols.h"

typedef struct FindExported {
        UnwindProcess *up;
        Symbolizer *sym;
        RuntimeKind kind;
        const char *const *names;
        size_t n;
        uint64_t *addrs, *best_addrs, *sizes;
        Dwfl_Module *mod;
        int found;
        int error;
        bool seen;
} FindExported;

static int find_exported_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg) {
        FindExported *f = arg;
        int r;

        (void) userdata;
        (void) start;
        if (unwind_process_module_not_read(f->up, name) ||
            runtime_of_interpreter_module(unwind_process_module_name(f->up, name)) != f->kind)
                return DWARF_CB_OK;
        f->seen = true;
        /* Its dynamic symbols: no pass over a large .symtab (node's holds 280,000). */
        r = symbolizer_find_exported(f->sym, mod, f->names, f->n, f->addrs, f->sizes);
        if (r == -ENOMEM) {
                f->error = r;
                return DWARF_CB_ABORT;
        }
        if (r <= f->found)
                return DWARF_CB_OK;
        f->found = r;
        f->mod = mod;
        memcpy(f->best_addrs, f->addrs, f->n * sizeof *f->addrs);
        return r == (int) f->n ? DWARF_CB_ABORT : DWARF_CB_OK;
}

int runtime_find_exported(UnwindProcess *up, Symbolizer *sym, RuntimeKind k, const char *const *names, size_t n,
                          Dwfl_Module **ret_mod, uint64_t *ret_addrs, bool *ret_seen) {
        _cleanup_free_ uint64_t *addrs = calloc(n ?: 1, sizeof *addrs), *sizes = calloc(n ?: 1, sizeof *sizes);
        FindExported f = { .up = up, .sym = sym, .kind = k, .names = names, .n = n, .addrs = addrs,
                           .best_addrs = ret_addrs, .sizes = sizes };

        if (!addrs || !sizes)
                return -ENOMEM;
        memset(ret_addrs, 0, n * sizeof *ret_addrs);
        dwfl_getmodules(unwind_process_dwfl(up), find_exported_cb, &f, 0);
        if (f.error < 0)
                return f.error;
        *ret_mod = f.mod;
        *ret_seen = f.seen;
        return f.found;
}
