/* string-table.h: enum <-> string lookups generated from one table per enum. */
#pragma once

#include <errno.h>
#include <string.h>

/* Defines name_to_string(type) and name_from_string(const char *), backed by name##_table. */
#define DEFINE_STRING_TABLE_LOOKUP(name, type)                                          \
        const char *name##_to_string(type i) {                                         \
                if ((int) i < 0 || (size_t) i >= sizeof(name##_table) / sizeof(name##_table[0])) \
                        return NULL;                                                    \
                return name##_table[i];                                                 \
        }                                                                               \
        type name##_from_string(const char *s) {                                       \
                if (!s)                                                                 \
                        return (type) -EINVAL;                                          \
                for (size_t i = 0; i < sizeof(name##_table) / sizeof(name##_table[0]); i++) \
                        if (name##_table[i] && strcmp(name##_table[i], s) == 0)         \
                                return (type) i;                                        \
                return (type) -EINVAL;                                                  \
        }
