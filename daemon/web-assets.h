#pragma once

#include <stddef.h>

/* The page's static files (daemon/web/), compiled in by daemon/web/embed.sh: no install path, no CDN. */
typedef struct WebAsset {
        const char *name;
        const unsigned char *data;
        size_t size;
} WebAsset;

/* Terminated by an entry with a NULL name. */
extern const WebAsset web_assets[];
