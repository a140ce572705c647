/* runtime-kind.c: the runtimes' rows of the model. A new runtime adds its RuntimeKind, its FrameKind and a row. */
#include <string.h>

#include "base/macro.h"
#include "model/runtime-kind.h"

static const char *const python_modules[] = { "libpython", "python", NULL };
static const char *const java_modules[] = { "libjvm", NULL };
static const char *const node_modules[] = { "node", "libnode", NULL };
static const char *const ruby_modules[] = { "libruby", "ruby", NULL };

const RuntimeTraits runtime_traits[_RUNTIME_MAX] = {
        [RUNTIME_PYTHON] = {
                .name = "python",
                .interpreter_modules = python_modules,
                .global_lock = "GIL",
                .lock_class = "threading.Lock",
                .owned_lock_class = "threading.RLock",
                .join_call = "Thread.join",
                .language = "Python",
                .owned_lock_held = "a Python RLock another thread holds",
                .global_lock_kept = "the GIL, which another thread keeps",
        },
        [RUNTIME_GO] = {
                .name = "go",
                .machine_frames = true,
                .machinery = "runtime.",
        },
        [RUNTIME_JAVA] = {
                .name = "java",
                .interpreter_modules = java_modules,
                .lock_class = "java.lang.Object",
        },
        [RUNTIME_NODE] = {
                .name = "node",
                .frame_kind = "js",
                .interpreter_modules = node_modules,
        },
        [RUNTIME_RUBY] = {
                .name = "ruby",
                .interpreter_modules = ruby_modules,
                .global_lock = "GVL",
                .lock_class = "Thread::Mutex",
                .owned_lock_class = "Thread::Mutex",
                .join_call = "Thread#join",
                .language = "Ruby",
                .owned_lock_held = "a Ruby Mutex another thread holds",
                .global_lock_kept = "the GVL, which another thread keeps",
        },
};

const char *runtime_kind_to_string(RuntimeKind k) {
        return (int) k >= 0 && k < _RUNTIME_MAX ? runtime_traits[k].name : NULL;
}

RuntimeKind runtime_kind_from_string(const char *s) {
        for (RuntimeKind k = 0; s && k < _RUNTIME_MAX; k++)
                if (streq(runtime_traits[k].name, s))
                        return k;
        return _RUNTIME_INVALID;
}

const char *frame_kind_to_string(FrameKind k) {
        RuntimeKind r = frame_kind_runtime(k);

        if (k == FRAME_KIND_NATIVE)
                return "native";
        return r < 0 ? NULL : runtime_traits[r].frame_kind ?: runtime_traits[r].name;
}

FrameKind frame_kind_from_string(const char *s) {
        if (s && streq(s, "native"))
                return FRAME_KIND_NATIVE;
        for (RuntimeKind k = 0; s && k < _RUNTIME_MAX; k++)
                if (streq(s, runtime_traits[k].frame_kind ?: runtime_traits[k].name))
                        return FRAME_KIND_RUNTIME(k);
        return _FRAME_KIND_INVALID;
}

RuntimeKind runtime_of_interpreter_module(const char *path) {
        const char *slash = path ? strrchr(path, '/') : NULL;
        const char *base = slash ? slash + 1 : path;

        for (RuntimeKind k = 0; base && k < _RUNTIME_MAX; k++)
                for (const char *const *m = runtime_traits[k].interpreter_modules; m && *m; m++)
                        if (startswith(base, *m))
                                return k;
        return _RUNTIME_INVALID;
}
