/* fuzz-java.c: what the Java reader parses of bytes a JVM, or a process posing as one, hands us: the answer to a
 * thread dump request (any process can map a file named libjvm.so and serve its own /tmp/.java_pid socket), and a
 * performance data file. A bad answer must merge no wrong thread and read nothing out of bounds. The first byte
 * picks: 't' the answer's text, merged into a snapshot of threads 1..64 each with native and code-cache frames;
 * 'p' an hsperfdata file. The seeds are a real OpenJDK 17 answer and a real hsperfdata file. */
#include <errno.h>

#include "runtime/java.h"
#include "fuzz.h"
#include "model/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Snapshot *s;
        char *text;

        if (size < 1)
                return 0;
        if (data[0] == 'p') {
                char *d = fuzz_memdup(data + 1, size - 1);

                (void) java_perfdata_attachable((const uint8_t *) d, size - 1);
                free(d);
                return 0;
        }
        if (data[0] != 't')
                return 0;
        s = snapshot_new();
        if (!s)
                abort();
        for (pid_t tid = 1; tid <= 64; tid++) {
                ThreadSnapshot *t = snapshot_add_thread(s);
                UserFrame *f;

                if (!t)
                        abort();
                t->tid = tid;
                for (int k = 0; k < 3; k++) {
                        if (!(f = thread_add_frame(t)))
                                abort();
                        f->pc = 0x1000 * (uint64_t) (k + 1);
                        f->module = k == 1 ? -1 : 0;
                }
        }
        text = fuzz_strndup(data + 1, size - 1);
        if (java_merge_threaddump(s, text, NULL) == -ENOMEM || !snapshot_runtime(s, RUNTIME_JAVA))
                abort();
        for (size_t i = 0; i < s->n_threads; i++) {
                const ThreadRuntime *rt = thread_runtime(&s->threads[i], RUNTIME_JAVA);

                /* A merged thread is one the answer named; its owners are threads of the dump. */
                for (size_t k = 0; rt && k < rt->n_locks; k++)
                        if (rt->locks[k].owner == s->threads[i].tid)
                                abort();
        }
        free(text);
        snapshot_free(s);
        return 0;
}
