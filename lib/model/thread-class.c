/* thread-class.c: thread class names. */
#include "base/string-table.h"
#include "model/thread-class.h"

static const char *const thread_class_table[_THREAD_CLASS_MAX] = {
        [THREAD_CLASS_RUNNING] = "running",
        [THREAD_CLASS_WAITING] = "waiting",
        [THREAD_CLASS_BLOCKED] = "blocked",
        [THREAD_CLASS_BUSY_LOOP] = "busy-loop",
        [THREAD_CLASS_SYSCALL_SPIN] = "syscall-spin",
        [THREAD_CLASS_STOPPED] = "stopped",
        [THREAD_CLASS_ZOMBIE] = "zombie",
        [THREAD_CLASS_FROZEN] = "frozen",
        [THREAD_CLASS_LOCK_RETRY] = "lock-retry",
};
DEFINE_STRING_TABLE_LOOKUP(thread_class, ThreadClass);
