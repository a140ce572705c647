#pragma once

#include <stdbool.h>

/* The web page's address for alerts: the first TCP listener's, set by http.c when it starts one, read when a rule
 * fires (hooks, Alertmanager, the journal). A module of its own so that firing.c needs nothing of the transport. */

/* HOSTPORT as the listener logs it ("127.0.0.1:9177", "[::1]:9177"); the first call wins. */
void page_link_set_base(const char *hostport, bool tls);

/* "http://HOST:PORT/#/snapshots/ID" (https with TLS); NULL without a TCP listener, without ID, or on OOM. */
char *page_link_snapshot(const char *id);
