/* signature.h: what makes two snapshots one problem. A snapshot's signature is its class and what its culprit waits
 * on, the first meaningful frames of the threads on its wait chain (the runtime's own frames where there are any,
 * else native frames past the skip list), and the processes the chain reaches, sorted, so that both sides of a
 * deadlock give one key. No address, offset, line or pid goes in: the key is the same across restarts, ASLR, hosts
 * and rebuilds that keep the functions. The rules are the table in signature.c. */
#pragma once

#include <stdbool.h>

#include "model/snapshot.h"

/* The key: a hash of the proto signature, SIGNATURE_LENGTH lowercase hex digits. */
#define SIGNATURE_LENGTH 16
/* Meaningful frames of one thread in the key, processes of a chain, threads of one process. */
#define SIGNATURE_FRAMES 3
#define SIGNATURE_PROCESSES 8
#define SIGNATURE_THREADS 4
/* The proto signature and the title are cut here (bytes, UTF-8 kept whole); the key hashes the proto as cut. */
#define SIGNATURE_PROTO_MAX 1024
#define SIGNATURE_TITLE_MAX 200

typedef struct SnapshotSignature {
        char key[SIGNATURE_LENGTH + 1];
        char *title;    /* "python3 blocked in read ← pipedl.py:<module> ⇄ python3 (deadlock)": process-supplied names as
                         * they are, escaped by whoever prints it */
        char *proto;    /* what the key hashes: "blocked deadlock: python3[read pipe: pipedl.py:<module>] ⇄ …" */
} SnapshotSignature;

/* The signature of S, a snapshot a rule took (S->trigger); -ENODATA for one without a trigger (a dump: nothing
 * fired), -ENOMEM. */
int snapshot_signature(const Snapshot *s, SnapshotSignature *ret);
void snapshot_signature_done(SnapshotSignature *sig);

/* Compute S's signature into S->signature and S->title unless it has them (a stored snapshot read back keeps the
 * ones it was written with). 0 also when S has none (no trigger); -ENOMEM. */
int snapshot_sign(Snapshot *s);

/* Whether S is a key of our form: the check for keys from the command line or HTTP. */
bool signature_is_valid(const char *s);
