/* py-offsets-headers.c: the offsets of python-offsets.h's fields as one CPython's own headers give them, printed as
 * "name value" lines ("none" where the version has no such field). Not built by make: test_python_offsets.py
 * compiles it against each installed CPython's headers (with its internal/ ones) and compares with our tables.
 * The lock objects of Modules/_threadmodule.c are not in any header: the test checks those in a live interpreter. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#if PY_VERSION_HEX < 0x03090000
#  include <internal/pycore_pystate.h>
#else
#  include <internal/pycore_runtime.h>
#  include <internal/pycore_interp.h>
#endif
#if PY_VERSION_HEX >= 0x030b0000
#  include <internal/pycore_frame.h>
#endif
#include <internal/pycore_gil.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define P(name, value) printf("%s %zu\n", name, (size_t) (value))
#define NONE(name) printf("%s none\n", name)

/* Which bit of PyASCIIObject's state the kind starts at: set kind to 1 in a zeroed state and look. */
static unsigned kind_shift(void) {
        PyASCIIObject o;
        unsigned char *p = (unsigned char *) &o.state;
        unsigned bit = 0;

        memset(&o, 0, sizeof o);
        o.state.kind = 1;
        for (size_t i = 0; i < sizeof o.state; i++)
                for (unsigned b = 0; b < 8; b++)
                        if (p[i] & (1U << b))
                                bit = (unsigned) (i * 8 + b);
        return bit;
}

int main(void) {
        printf("version %u\n", (unsigned) PY_VERSION_HEX);
#if PY_VERSION_HEX < 0x030b0000
        printf("frames object\n");
#else
        printf("frames interp\n");
#endif
#if PY_VERSION_HEX < 0x030a0000
        printf("lines lnotab\n");
#elif PY_VERSION_HEX < 0x030b0000
        printf("lines linetable\n");
#else
        printf("lines locations\n");
#endif

        P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX < 0x030c0000
        P("runtime_gil", offsetof(_PyRuntimeState, ceval.gil));
        P("runtime_tstate_current", offsetof(_PyRuntimeState, gilstate.tstate_current));
        NONE("interp_gil");
#else
        NONE("runtime_gil");
        NONE("runtime_tstate_current");
        P("interp_gil", offsetof(PyInterpreterState, ceval.gil));
#endif
        P("interp_next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX < 0x030b0000
        P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#else
        P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#endif
        P("gil_last_holder", offsetof(struct _gil_runtime_state, last_holder));
        P("gil_locked", offsetof(struct _gil_runtime_state, locked));

        P("tstate_next", offsetof(PyThreadState, next));
        P("tstate_interp", offsetof(PyThreadState, interp));
        P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX < 0x030d0000
        P("tstate_on_delete_data", offsetof(PyThreadState, on_delete_data));
#else
        NONE("tstate_on_delete_data");
#endif
#if PY_VERSION_HEX < 0x030b0000
        P("tstate_frame", offsetof(PyThreadState, frame));
        NONE("tstate_cframe");
        NONE("cframe_current_frame");
        NONE("tstate_native_thread_id");
        P("frame_back", offsetof(PyFrameObject, f_back));
        P("frame_code", offsetof(PyFrameObject, f_code));
        P("frame_lasti", offsetof(PyFrameObject, f_lasti));
        P("frame_localsplus", offsetof(PyFrameObject, f_localsplus));
        NONE("iframe_code");
        NONE("iframe_previous");
        NONE("iframe_instr");
        NONE("iframe_is_entry");
        NONE("iframe_owner");
        NONE("iframe_size");
#else
#  if PY_VERSION_HEX < 0x030d0000
        NONE("tstate_frame");
        P("tstate_cframe", offsetof(PyThreadState, cframe));
        P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
        P("iframe_code", offsetof(_PyInterpreterFrame, f_code));
        P("iframe_instr", offsetof(_PyInterpreterFrame, prev_instr));
#  else
        P("tstate_frame", offsetof(PyThreadState, current_frame));
        NONE("tstate_cframe");
        NONE("cframe_current_frame");
        P("iframe_code", offsetof(_PyInterpreterFrame, f_executable));
        P("iframe_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#  endif
        P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
        NONE("frame_back");
        NONE("frame_code");
        NONE("frame_lasti");
        NONE("frame_localsplus");
        P("iframe_previous", offsetof(_PyInterpreterFrame, previous));
#  if PY_VERSION_HEX < 0x030c0000
        P("iframe_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#  else
        NONE("iframe_is_entry");
#  endif
        P("iframe_owner", offsetof(_PyInterpreterFrame, owner));
        /* The frame up to its locals: every field we read, owner included. */
        P("iframe_size", offsetof(_PyInterpreterFrame, localsplus));
#endif

        P("code_filename", offsetof(PyCodeObject, co_filename));
        P("code_name", offsetof(PyCodeObject, co_name));
        P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX < 0x030a0000
        P("code_linetable", offsetof(PyCodeObject, co_lnotab));
#else
        P("code_linetable", offsetof(PyCodeObject, co_linetable));
#endif
#if PY_VERSION_HEX < 0x030b0000
        NONE("code_qualname");
        NONE("code_adaptive");
#else
        P("code_qualname", offsetof(PyCodeObject, co_qualname));
        P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif

        P("object_type", offsetof(PyObject, ob_type));
        P("type_name", offsetof(PyTypeObject, tp_name));
        P("varobject_size", offsetof(PyVarObject, ob_size));
        P("bytes_data", offsetof(PyBytesObject, ob_sval));
        P("unicode_length", offsetof(PyASCIIObject, length));
        P("unicode_state", offsetof(PyASCIIObject, state));
        P("unicode_state_kind_shift", kind_shift());
        P("unicode_ascii_data", sizeof(PyASCIIObject));
        P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
        return 0;
}
