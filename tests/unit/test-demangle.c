/* test-demangle.c: C++ and Rust (legacy and v0) names as a person reads them, by libiberty; C names untouched. */
#include "unit.h"
#include <stdlib.h>
#include <string.h>

#include "base/demangle.h"

START_TEST(test_demangle_table) {
        static const struct {
                const char *in, *out;   /* out NULL: not a mangled name, left as it is */
        } cases[] = {
                /* C++ (Itanium): namespaces, operator(), templates, a lambda. */
                { "_ZN3eco6detail6ServerclEi", "eco::detail::Server::operator()(int)" },
                { "_ZN3eco6detail6ServerIlEclEi", "eco::detail::Server<long>::operator()(int)" },
                { "_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()() const" },
                { "_ZNSt6thread11_State_implINS_8_InvokerISt5tupleIJPFvvEEEEEE6_M_runEv",
                  "std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)()> > >::_M_run()" },
                /* Rust legacy: Itanium-shaped, the trailing hash dropped. */
                { "_ZN4core3fmt5write17h1234567890abcdefE", "core::fmt::write" },
                { "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h0123456789abcdefE",
                  "std::rt::lang_start::{{closure}}" },
                /* Rust v0. */
                { "_RNvCs1234_7mycrate3foo", "mycrate::foo" },
                { "_RNvNtCs15kwBRPmCkpI_4core3fmt5write", "core::fmt::write" },
                /* C, and names that only look mangled. */
                { "main", NULL },
                { "read", NULL },
                { "_Zgarbage", NULL },
                { "_R", NULL },
                { "", NULL },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char *d = demangle_name(cases[i].in);
                if (cases[i].out) {
                        ck_assert_msg(d, "%s: not demangled", cases[i].in);
                        ck_assert_str_eq(d, cases[i].out);
                } else
                        ck_assert_msg(!d, "%s: demangled to %s", cases[i].in, d);
                free(d);
        }
        ck_assert_ptr_null(demangle_name(NULL));
}
END_TEST

/* A hostile symbol table's name: very long or deeply nested is left alone, never a crash or a hang. */
START_TEST(test_demangle_hostile) {
        size_t n = 100000;
        char *s = malloc(n + 1);

        ck_assert_ptr_nonnull(s);
        memcpy(s, "_ZN", 3);
        memset(s + 3, 'N', n - 3);
        s[n] = 0;
        ck_assert_ptr_null(demangle_name(s));
        /* Deep nesting within the length bound: libiberty's recursion limit refuses it. */
        memcpy(s, "_Z", 2);
        for (size_t i = 2; i < 4000; i += 2)
                memcpy(s + i, "PF", 2);
        s[4000] = 0;
        free(demangle_name(s));
        free(s);
}
END_TEST

UNIT_TEST_MAIN("demangle", test_demangle_table, test_demangle_hostile)
