/* runtime-kind.h: the language runtimes a snapshot knows, and what the model says of each: its name (its frames'
 * kind, its JSON key, its --no-NAME), whether its frames are machine frames, the native modules its interpreter runs
 * in, its own machinery. runtime/ reads a runtime; this names it for everyone who renders or reads a snapshot. */
#pragma once

#include <errno.h>
#include <stdbool.h>

/* The runtimes, the index of each one's row here and in runtime/runtime.c, and its bit in the capture's masks. */
typedef enum RuntimeKind {
        RUNTIME_PYTHON,
        RUNTIME_GO,
        RUNTIME_JAVA,
        RUNTIME_NODE,
        RUNTIME_RUBY,
        _RUNTIME_MAX,
        _RUNTIME_INVALID = -EINVAL,
} RuntimeKind;

/* What a user frame is: a machine frame, or a frame of a runtime (FRAME_KIND_RUNTIME + its RuntimeKind). */
typedef enum FrameKind {
        FRAME_KIND_NATIVE,
        FRAME_KIND_PYTHON,      /* CPython: function (the qualified name), file and line; no pc, no module */
        FRAME_KIND_GO,          /* a goroutine's frame: a Go function's pc in the binary, as native frames are */
        FRAME_KIND_JAVA,        /* a JVM's: class.method, file and line as its thread dump names them; no pc */
        FRAME_KIND_JS,          /* V8's (Node.js): the function as Node's stack traces name it, script, line, column */
        FRAME_KIND_RUBY,        /* CRuby's: the label (method) as Ruby's backtraces name it, path and line */
        _FRAME_KIND_MAX,
        _FRAME_KIND_INVALID = -EINVAL,
} FrameKind;

#define FRAME_KIND_RUNTIME(k) ((FrameKind) (FRAME_KIND_NATIVE + 1 + (k)))

/* What the model knows of a runtime, one row each. */
typedef struct RuntimeTraits {
        const char *name;               /* "python": its JSON key, its --no-NAME, and the kind of its frames */
        const char *frame_kind;         /* the kind of its frames where that is not NAME ("js" for "node"); NULL */
        bool machine_frames;            /* its frames are a pc in a module (Go's), not a function, file and line */
        const char *const *interpreter_modules; /* prefixes of the native modules' base names that run its code
                                                 * ("libpython"), NULL-terminated; NULL: none */
        const char *machinery;          /* the prefix of its own machinery's functions among its frames ("runtime.");
                                         * NULL: none */
        const char *global_lock;        /* its global lock's name ("GIL"); NULL: it has none */
        const char *lock_class;         /* what a lock of it is called when the runtime names no class; NULL */
        const char *owned_lock_class;   /* what a lock that records its owner is called ("threading.RLock"); NULL */
        const char *join_call;          /* how a wait for a thread's end is called ("Thread.join"); NULL */
        const char *language;           /* the language its code is in ("Python"); NULL */
        const char *owned_lock_held;    /* why a wait for its lock that records an owner is owed: "a Python RLock
                                         * another thread holds"; NULL */
        const char *global_lock_kept;   /* why a wait for its global lock is owed: "the GIL, which another thread
                                         * keeps"; NULL */
} RuntimeTraits;

extern const RuntimeTraits runtime_traits[_RUNTIME_MAX];

const char *runtime_kind_to_string(RuntimeKind k);
RuntimeKind runtime_kind_from_string(const char *s);

const char *frame_kind_to_string(FrameKind k);
FrameKind frame_kind_from_string(const char *s);

/* The runtime whose frame kind K is; -EINVAL for a native frame. */
static inline RuntimeKind frame_kind_runtime(FrameKind k) {
        return k > FRAME_KIND_NATIVE && k < _FRAME_KIND_MAX ? (RuntimeKind) (k - FRAME_KIND_NATIVE - 1)
                                                              : _RUNTIME_INVALID;
}

/* A runtime's own frame (Python, Java): a function, file and line, no pc or module. */
static inline bool frame_kind_is_runtime(FrameKind k) {
        RuntimeKind r = frame_kind_runtime(k);
        return r >= 0 && !runtime_traits[r].machine_frames;
}

/* The runtime whose interpreter the native module PATH is (its base name starts with one of a runtime's
 * interpreter_modules); -EINVAL when none. */
RuntimeKind runtime_of_interpreter_module(const char *path);
