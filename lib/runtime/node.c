/* node.c: a Node.js process's JavaScript frames, read from outside with process_vm_readv and the copy of each thread's
 * stack, never stopping a thread for them.
 *
 * V8 describes itself to debuggers: its module (node, or libnode.so) exports v8dbg_* constants (llnode's and
 * OpenTelemetry's profiler's source): the frame layout (fp-8 holds a frame's context or, for a typed frame, its type
 * marker; fp-16 a JavaScript frame's JSFunction; fp-32 and fp-40 an interpreted frame's BytecodeArray and offset),
 * the frame type numbers, class field offsets and instance types. V8's code keeps frame pointers, so a thread's
 * JavaScript frames are the frame-pointer chain from the innermost native frame whose frame pointer holds a V8 frame
 * (the exit frame of a call out of JavaScript, or a JavaScript frame itself) to the entry frame; a C++ callback that
 * calls JavaScript again starts another such run further out. Every object is checked by its map's instance type
 * before it is read as that object; a frame that does not check out is shown as unknown, with the reason, never with
 * a name it may not have.
 *
 * What the metadata does not give is per-version knowledge, kept here for V8 10.2-11.3 (Node 18 and 20) and checked on
 * every object: the ScopeInfo slots that hold a compiled function's name (flags, parameter count, context local
 * count, the context locals' names and infos, then the function variable and the inferred name), and the
 * BytecodeArray's source position table slot. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "model/proc-parse.h"
#include "proc/proc-read.h"
#include "runtime/node-tables.h"
#include "runtime/node.h"
#include "runtime/runtime-symbols.h"

#define JS_FRAMES_SEGMENT_MAX 4096U   /* V8 frames walked from one start */
#define JS_FRAME_BYTES_MAX (1U << 20) /* the largest step from a frame to its caller's */
#define JS_NAME_UNITS_MAX 512U        /* characters of a name or script path read */
#define JS_CONS_DEPTH_MAX 24U
#define JS_SOURCE_UNITS_MAX (16U << 20) /* characters of a script's source counted for its lines */
#define JS_SOURCE_CHUNK 65536U
#define JS_LINE_ENDS_MAX (1U << 22)
#define JS_LINE_ENDS_TOTAL_MAX (1U << 24) /* line ends kept by one capture, all scripts together: 64 MB */
#define JS_POSITIONS_BYTES_MAX (1U << 20)
#define JS_SFI_CACHE_MAX 1024U
#define JS_SCRIPTS_MAX 256U
#define JS_CONSTRUCTOR_CHAIN_MAX 32U

/* Per-version knowledge (V8 10.2-11.3), checked on every object read with it. */
#define JS_BYTECODE_POSITIONS_OFFSET 32 /* BytecodeArray::source_position_table */
/* An external string caches its resource's data pointer in the word after the resource, unless its type says it is
 * uncached (a short string). */
#define JS_EXTERNAL_DATA_AFTER_RESOURCE 8
#define JS_EXTERNAL_UNCACHED_BIT 0x10
/* A class constructor's instance type: the last of the JSFunction types, 15 after JS_FUNCTION_TYPE. */
#define JS_CLASS_CONSTRUCTOR_AFTER_FUNCTION 15
/* Optimized code: where its Code object is (found back from a pc, its instructions 64-byte aligned), and the Code's
 * own slots. 11.3 keeps the instructions in an InstructionStream whose second word points back at its Code, which
 * holds the instruction stream, its start and its size; 10.2 keeps them inside the Code. Either way the Code's
 * source position table is its fourth slot. */
#define JS_CODE_ALIGNMENT 64U
#define JS_CODE_SCAN_BYTES (256U * 1024)
#define JS_CODE_BYTES_MAX (16U << 20)
#define JS_CODE_POSITIONS_OFFSET 24
#define JS_STREAM_CODE_OFFSET 8
#define JS_CODE_STREAM_OFFSET 32
#define JS_CODE_START_OFFSET 40
#define JS_CODE_SIZE_OFFSET 56
#define JS_SCOPE_FLAGS_SLOT 1 /* ScopeInfo slots after the map: flags, parameter count, context locals */
#define JS_SCOPE_CONTEXT_LOCALS_SLOT 3
#define JS_SCOPE_VARIABLES_SLOT 4
#define JS_SCOPE_INLINED_NAMES_MAX 75 /* kScopeInfoMaxInlinedLocalNamesSize: more names go to a hash table */
#define JS_SCOPE_TYPE_MASK 0xfU
#define JS_SCOPE_TYPE_MODULE 3U
#define JS_SCOPE_SAVED_CLASS_VARIABLE (1U << 10)
#define JS_SCOPE_FUNCTION_VARIABLE_SHIFT 12
#define JS_SCOPE_INFERRED_NAME (1U << 14)
#define JS_SCOPE_IS_EMPTY (1U << 28)

/* V8's layout, as its metadata gives it. -1: not exported (optional constants only). */
typedef struct V8Layout {
        int64_t pointer_size, tagged_size, smi_shift_size, smi_tag, smi_tag_mask, heap_tag, heap_tag_mask;
        int64_t fp_context, fp_function, fp_bytecode_array, fp_bytecode_offset, fp_args;
        int64_t ft_entry, ft_construct_entry, ft_exit, ft_builtin_exit, ft_construct, ft_interpreted, ft_baseline;
        int64_t ft_maglev, ft_turbofan, ft_optimized;
        int64_t heap_map, map_type, map_constructor;
        int64_t fn_shared, sfi_name, sfi_script, sfi_data;
        int64_t script_name, script_source, script_line_ends;
        int64_t str_length, seq_chars, cons_first, cons_second, sliced_parent, sliced_offset, thin_actual;
        int64_t ext_resource;
        int64_t array_length, array_data, bytecode_header;
        int64_t oddball_kind, oddball_undefined, oddball_null, oddball_true, oddball_false;
        int64_t first_nonstring, rep_mask, enc_mask, one_byte_tag, seq_tag, cons_tag, ext_tag, sliced_tag, thin_tag;
        int64_t t_function, t_sfi, t_script, t_scope_info, t_bytecode, t_byte_array, t_fixed_array, t_oddball;
        int64_t t_global_proxy, t_map, t_uncompiled[4], uncompiled_inferred;
        int64_t scope_nparams, scope_ncontextlocals, scope_first_vars;
        int64_t t_code, t_stream, stream_start, code_start, code_size;
} V8Layout;

typedef struct V8Constant {
        const char *symbol;
        size_t offset;
        bool optional;
} V8Constant;

#define C(sym, field)                                                                                                 \
        { "v8dbg_" sym, offsetof(V8Layout, field), false }
#define OPT(sym, field)                                                                                               \
        { "v8dbg_" sym, offsetof(V8Layout, field), true }
static const V8Constant v8_constants[] = {
        C("SystemPointerSize", pointer_size),
        C("TaggedSize", tagged_size),
        C("SmiShiftSize", smi_shift_size),
        C("SmiTag", smi_tag),
        C("SmiTagMask", smi_tag_mask),
        C("HeapObjectTag", heap_tag),
        C("HeapObjectTagMask", heap_tag_mask),
        C("off_fp_context_or_frame_type", fp_context),
        C("off_fp_function", fp_function),
        C("off_fp_bytecode_array", fp_bytecode_array),
        C("off_fp_bytecode_offset", fp_bytecode_offset),
        C("off_fp_args", fp_args),
        C("frametype_EntryFrame", ft_entry),
        C("frametype_ConstructEntryFrame", ft_construct_entry),
        C("frametype_ExitFrame", ft_exit),
        C("frametype_BuiltinExitFrame", ft_builtin_exit),
        C("frametype_ConstructFrame", ft_construct),
        C("frametype_InterpretedFrame", ft_interpreted),
        OPT("frametype_BaselineFrame", ft_baseline),
        OPT("frametype_MaglevFrame", ft_maglev),
        OPT("frametype_TurbofanFrame", ft_turbofan),
        OPT("frametype_OptimizedFrame", ft_optimized),
        C("class_HeapObject__map__Map", heap_map),
        C("class_Map__instance_type__uint16_t", map_type),
        C("class_Map__constructor_or_back_pointer__Object", map_constructor),
        C("class_JSFunction__shared__SharedFunctionInfo", fn_shared),
        C("class_SharedFunctionInfo__name_or_scope_info__Object", sfi_name),
        C("class_SharedFunctionInfo__script_or_debug_info__HeapObject", sfi_script),
        C("class_SharedFunctionInfo__function_data__Object", sfi_data),
        C("class_Script__name__Object", script_name),
        C("class_Script__source__Object", script_source),
        C("class_Script__line_ends__Object", script_line_ends),
        C("class_String__length__int32_t", str_length),
        C("class_SeqOneByteString__chars__char", seq_chars),
        C("class_ConsString__first__String", cons_first),
        C("class_ConsString__second__String", cons_second),
        C("class_SlicedString__parent__String", sliced_parent),
        C("class_SlicedString__offset__SMI", sliced_offset),
        C("class_ThinString__actual__String", thin_actual),
        C("class_ExternalString__resource__Object", ext_resource),
        C("class_FixedArrayBase__length__SMI", array_length),
        C("class_FixedArray__data__uintptr_t", array_data),
        C("class_BytecodeArray__data__uintptr_t", bytecode_header),
        C("class_Oddball__kind_offset__int", oddball_kind),
        C("OddballUndefined", oddball_undefined),
        C("OddballNull", oddball_null),
        C("OddballTrue", oddball_true),
        C("OddballFalse", oddball_false),
        C("FirstNonstringType", first_nonstring),
        C("StringRepresentationMask", rep_mask),
        C("StringEncodingMask", enc_mask),
        C("OneByteStringTag", one_byte_tag),
        C("SeqStringTag", seq_tag),
        C("ConsStringTag", cons_tag),
        C("ExternalStringTag", ext_tag),
        C("SlicedStringTag", sliced_tag),
        C("ThinStringTag", thin_tag),
        C("type_JSFunction__JS_FUNCTION_TYPE", t_function),
        C("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", t_sfi),
        C("type_Script__SCRIPT_TYPE", t_script),
        C("type_ScopeInfo__SCOPE_INFO_TYPE", t_scope_info),
        C("type_BytecodeArray__BYTECODE_ARRAY_TYPE", t_bytecode),
        C("type_ByteArray__BYTE_ARRAY_TYPE", t_byte_array),
        C("type_FixedArray__FIXED_ARRAY_TYPE", t_fixed_array),
        C("type_Oddball__ODDBALL_TYPE", t_oddball),
        C("type_JSGlobalProxy__JS_GLOBAL_PROXY_TYPE", t_global_proxy),
        C("type_Map__MAP_TYPE", t_map),
        C("type_UncompiledDataWithoutPreparseData__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_TYPE", t_uncompiled[0]),
        C("type_UncompiledDataWithPreparseData__UNCOMPILED_DATA_WITH_PREPARSE_DATA_TYPE", t_uncompiled[1]),
        OPT("type_UncompiledDataWithoutPreparseDataWithJob__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_WITH_JOB_TYPE",
            t_uncompiled[2]),
        OPT("type_UncompiledDataWithPreparseDataAndJob__UNCOMPILED_DATA_WITH_PREPARSE_DATA_AND_JOB_TYPE",
            t_uncompiled[3]),
        C("class_UncompiledData__inferred_name__String", uncompiled_inferred),
        C("scopeinfo_idx_nparams", scope_nparams),
        C("scopeinfo_idx_ncontextlocals", scope_ncontextlocals),
        C("scopeinfo_idx_first_vars", scope_first_vars),
        C("type_Code__CODE_TYPE", t_code),
        OPT("type_InstructionStream__INSTRUCTION_STREAM_TYPE", t_stream),
        OPT("class_InstructionStream__instruction_start__uintptr_t", stream_start),
        OPT("class_Code__instruction_start__uintptr_t", code_start),
        OPT("class_Code__instruction_size__int", code_size),
};
#undef C
#undef OPT

/* A script's line ends (the offsets of its newlines), as Script.line_ends holds them or counted in its source. */
typedef struct JsScript {
        uint64_t addr;
        uint32_t *ends;
        size_t n_ends;
        bool failed;
} JsScript;

/* A SharedFunctionInfo as read once per capture: its name as V8's DebugName() gives it, its script. */
typedef struct JsFunction {
        uint64_t sfi;
        char *name; /* "" for an anonymous function; NULL when it could not be read (WHY says why) */
        const char *why;
        char *file; /* the script's name; NULL for a builtin (no script) */
        uint64_t script;
} JsFunction;

/* V8's interpreter's own table of bytecode sizes (Bytecodes::kBytecodeSizes, exported by its module): a baseline
 * frame's pc maps to the n-th bytecode of its function, whose offset only the sizes of those before it give. */
#define JS_BYTECODE_SIZES_SYMBOL "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE"
#define JS_BYTECODES_MAX 1024U
#define JS_BYTECODE_BYTES_MAX (1U << 20)

/* V8's objects are read a field at a time; a capture keeps the lines of the heap it read (a direct-mapped cache), so
 * that the fields of one object, and of its neighbours, cost one read of the process. */
#define JS_LINE_BYTES 2048U
#define JS_LINES 128U

typedef struct JsLine {
        uint64_t base; /* 0: empty */
        uint8_t data[JS_LINE_BYTES];
} JsLine;

typedef struct NodeProcess {
        pid_t pid;
        JsLine *lines; /* [JS_LINES], allocated on first use */
        V8Layout v;
        uint8_t *bytecode_sizes; /* [3][n_bytecodes]: single, double, quadruple operand scale; NULL: not known */
        size_t n_bytecodes;
        const UnwindStack *stack; /* the copy of the stack being walked, NULL between threads */
        JsFunction *functions;
        size_t n_functions;
        JsScript *scripts;
        size_t n_scripts;
        size_t n_line_ends;  /* of all its scripts */
        uint64_t table_addr; /* the source position table TABLE[0..TABLE_N) holds; 0: none */
        uint8_t *table;
        size_t table_n;
} NodeProcess;

/* One JavaScript frame as walked: the pc at which its code runs (the native frame that stands for it), and what it
 * is. */
typedef struct JsFrame {
        uint64_t pc;
        char *function; /* as Node's stack traces print it; "<unknown>" when the frame did not check out */
        char *name;     /* the function's own name ("" when anonymous); NULL when unknown */
        char *file;
        unsigned line, column; /* 0 when not known */
        const char *note;      /* why the line is not known, or why the frame is unknown; NULL */
} JsFrame;

typedef struct JsStack {
        JsFrame *frames;
        size_t n;
        bool top_in_v8; /* the innermost native frame is V8's own code: the thread runs JavaScript */
        bool truncated;
        char end[160]; /* why a walk stopped early; "" */
} JsStack;

/* ---- memory and tagged values ---- */

static int js_read(const NodeProcess *p, uint64_t addr, void *buf, size_t n) {
        const UnwindStack *s = p->stack;
        uint64_t base = addr & ~(uint64_t) (JS_LINE_BYTES - 1);
        JsLine *l;

        if (s && addr >= s->base && addr - s->base <= s->len && n <= s->len - (addr - s->base)) {
                memcpy(buf, s->data + (addr - s->base), n);
                return 0;
        }
        /* Within one line: from the cache. A line that cannot be read whole (a mapping's end) is read as asked. */
        if (p->lines && base != 0 && addr - base + n <= JS_LINE_BYTES) {
                l = &p->lines[(base / JS_LINE_BYTES) % JS_LINES];
                if (l->base != base) {
                        l->base = 0;
                        if (proc_mem_read(p->pid, base, l->data, JS_LINE_BYTES) < 0)
                                return proc_mem_read(p->pid, addr, buf, n);
                        l->base = base;
                }
                memcpy(buf, l->data + (addr - base), n);
                return 0;
        }
        return proc_mem_read(p->pid, addr, buf, n);
}

static bool js_word(const NodeProcess *p, uint64_t addr, uint64_t *ret) {
        return js_read(p, addr, ret, sizeof *ret) >= 0;
}

static bool is_smi(const NodeProcess *p, uint64_t v) {
        return (int64_t) (v & (uint64_t) p->v.smi_tag_mask) == p->v.smi_tag;
}

static int64_t smi_value(const NodeProcess *p, uint64_t v) {
        return (int64_t) v >> (p->v.smi_shift_size + 1);
}

static bool is_heap_object(const NodeProcess *p, uint64_t v) {
        return v > 4096 && (int64_t) (v & (uint64_t) p->v.heap_tag_mask) == p->v.heap_tag;
}

static bool js_field(const NodeProcess *p, uint64_t obj, int64_t offset, uint64_t *ret) {
        return is_heap_object(p, obj) && js_word(p, obj - (uint64_t) p->v.heap_tag + (uint64_t) offset, ret);
}

/* The instance type of heap object OBJ (its map's), -1 when OBJ is none or cannot be read. */
static int js_type(const NodeProcess *p, uint64_t obj) {
        uint64_t map;
        uint16_t type;

        if (!js_field(p, obj, p->v.heap_map, &map) || !is_heap_object(p, map) ||
            js_read(p, map - (uint64_t) p->v.heap_tag + (uint64_t) p->v.map_type, &type, sizeof type) < 0)
                return -1;
        return type;
}

static bool is_string_type(const NodeProcess *p, int type) {
        return type >= 0 && type < p->v.first_nonstring;
}

/* JSFunction and the instance types after it (the builtins' constructors, which V8 numbers next, and last the class
 * constructors), whose shared function info is then checked. */
static bool is_function_type(const NodeProcess *p, int type) {
        return type >= p->v.t_function && type <= p->v.t_function + JS_CLASS_CONSTRUCTOR_AFTER_FUNCTION;
}

/* The SharedFunctionInfo of function FN, both checked by their instance types; 0 when FN is no function. */
static uint64_t shared_of(const NodeProcess *p, uint64_t fn) {
        uint64_t sfi;

        if (!is_function_type(p, js_type(p, fn)) || !js_field(p, fn, p->v.fn_shared, &sfi) ||
            js_type(p, sfi) != p->v.t_sfi)
                return 0;
        return sfi;
}

/* The length of array OBJ (a FixedArray, ByteArray or BytecodeArray) when it is of instance type TYPE and at most
 * MAX; -1 when not. */
static int64_t array_length(const NodeProcess *p, uint64_t obj, int64_t type, size_t max) {
        uint64_t len;
        int64_t n;

        if (js_type(p, obj) != type || !js_field(p, obj, p->v.array_length, &len) || !is_smi(p, len) ||
            (n = smi_value(p, len)) < 0 || (uint64_t) n > max)
                return -1;
        return n;
}

static bool is_uncompiled_type(const NodeProcess *p, int type) {
        for (size_t i = 0; i < ELEMENTSOF(p->v.t_uncompiled); i++)
                if (p->v.t_uncompiled[i] >= 0 && type == p->v.t_uncompiled[i])
                        return true;
        return false;
}

/* ---- strings ---- */

/* Where the characters of string OBJ of TYPE are when it is flat: sequential, or external with its data cached. */
static bool chars_of(const NodeProcess *p, uint64_t obj, int type, uint64_t *ret) {
        const V8Layout *v = &p->v;

        if ((type & v->rep_mask) == v->seq_tag) {
                *ret = obj - (uint64_t) v->heap_tag + (uint64_t) v->seq_chars;
                return true;
        }
        return (type & v->rep_mask) == v->ext_tag && !(type & JS_EXTERNAL_UNCACHED_BIT) &&
               js_field(p, obj, v->ext_resource + JS_EXTERNAL_DATA_AFTER_RESOURCE, ret) && *ret != 0;
}

/* UNITS[0..N) of string OBJ from character FROM on, into OUT (UTF-16 code units; Latin-1 widened). */
static int js_string_units(const NodeProcess *p, uint64_t obj, size_t from, size_t n, uint16_t *out, unsigned depth) {
        const V8Layout *v = &p->v;

        while (n > 0) {
                int type = js_type(p, obj);
                uint64_t a, b;
                int32_t len;
                bool one;

                if (!is_string_type(p, type) || depth > JS_CONS_DEPTH_MAX ||
                    js_read(p, obj - (uint64_t) v->heap_tag + (uint64_t) v->str_length, &len, sizeof len) < 0 ||
                    len < 0 || from + n > (size_t) len)
                        return -EBADMSG;
                one = (type & v->enc_mask) == v->one_byte_tag;
                if ((type & v->rep_mask) == v->seq_tag || (type & v->rep_mask) == v->ext_tag) {
                        _cleanup_free_ uint8_t *buf = NULL;
                        uint64_t data;

                        if (!chars_of(p, obj, type, &data))
                                return -EBADMSG;
                        buf = malloc(n * (one ? 1 : 2));
                        if (!buf)
                                return -ENOMEM;
                        if (js_read(p, data + from * (one ? 1 : 2), buf, n * (one ? 1 : 2)) < 0)
                                return -EFAULT;
                        for (size_t i = 0; i < n; i++)
                                out[i] = (uint16_t) (one ? buf[i] : buf[2 * i] | buf[2 * i + 1] << 8);
                        return 0;
                }
                if ((type & v->rep_mask) == v->thin_tag) {
                        if (!js_field(p, obj, v->thin_actual, &obj))
                                return -EBADMSG;
                } else if ((type & v->rep_mask) == v->sliced_tag) {
                        if (!js_field(p, obj, v->sliced_parent, &a) || !js_field(p, obj, v->sliced_offset, &b) ||
                            !is_smi(p, b) || smi_value(p, b) < 0)
                                return -EBADMSG;
                        from += (size_t) smi_value(p, b);
                        obj = a;
                } else if ((type & v->rep_mask) == v->cons_tag) {
                        int32_t first_len;
                        int r;

                        if (!js_field(p, obj, v->cons_first, &a) || !js_field(p, obj, v->cons_second, &b) ||
                            js_read(p, a - (uint64_t) v->heap_tag + (uint64_t) v->str_length, &first_len,
                                    sizeof first_len) < 0 ||
                            first_len < 0 || first_len > len)
                                return -EBADMSG;
                        if (from < (size_t) first_len) {
                                size_t k = MIN(n, (size_t) first_len - from);

                                r = js_string_units(p, a, from, k, out, depth + 1);
                                if (r < 0)
                                        return r;
                                out += k;
                                n -= k;
                                from = 0;
                        } else
                                from -= (size_t) first_len;
                        obj = b;
                } else
                        return -EBADMSG;
                depth++;
        }
        return 0;
}

/* Where the characters of string OBJ are when it is a flat one-byte string (sequential, or external with its data
 * cached; a thin string's target): *RET_DATA, *RET_LEN. Else false. */
/* The length of string OBJ; -EBADMSG when it is none. */
static int64_t js_string_length(const NodeProcess *p, uint64_t obj) {
        int32_t len;

        if (!is_string_type(p, js_type(p, obj)) ||
            js_read(p, obj - (uint64_t) p->v.heap_tag + (uint64_t) p->v.str_length, &len, sizeof len) < 0 || len < 0)
                return -EBADMSG;
        return len;
}

/* Where the characters of string OBJ are when it is a flat one-byte string (a thin string's target): *RET_DATA,
 * *RET_LEN. Else false. */
static bool js_flat_one_byte(const NodeProcess *p, uint64_t obj, uint64_t *ret_data, size_t *ret_len) {
        const V8Layout *v = &p->v;
        int type = js_type(p, obj);
        int64_t len;

        if (is_string_type(p, type) && (type & v->rep_mask) == v->thin_tag &&
            (!js_field(p, obj, v->thin_actual, &obj) || (type = js_type(p, obj)) < 0))
                return false;
        if (!is_string_type(p, type) || (type & v->enc_mask) != v->one_byte_tag ||
            (len = js_string_length(p, obj)) < 0 || !chars_of(p, obj, type, ret_data))
                return false;
        *ret_len = (size_t) len;
        return true;
}

static void utf8_put(char **w, uint32_t c) {
        char *o = *w;

        if (c < 0x80)
                *o++ = (char) c;
        else if (c < 0x800) {
                *o++ = (char) (0xc0 | c >> 6);
                *o++ = (char) (0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
                *o++ = (char) (0xe0 | c >> 12);
                *o++ = (char) (0x80 | ((c >> 6) & 0x3f));
                *o++ = (char) (0x80 | (c & 0x3f));
        } else {
                *o++ = (char) (0xf0 | c >> 18);
                *o++ = (char) (0x80 | ((c >> 12) & 0x3f));
                *o++ = (char) (0x80 | ((c >> 6) & 0x3f));
                *o++ = (char) (0x80 | (c & 0x3f));
        }
        *w = o;
}

/* String OBJ as UTF-8 (its first JS_NAME_UNITS_MAX characters), in *RET. -EBADMSG when OBJ is no string. */
static int js_string(const NodeProcess *p, uint64_t obj, char **ret) {
        uint16_t units[JS_NAME_UNITS_MAX];
        int64_t len = js_string_length(p, obj);
        size_t n;
        char *s, *w;
        int r;

        if (len < 0)
                return (int) len;
        n = MIN((size_t) len, (size_t) JS_NAME_UNITS_MAX);
        r = js_string_units(p, obj, 0, n, units, 0);
        if (r < 0)
                return r;
        s = w = malloc(n * 3 + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint32_t c = units[i];

                if (c >= 0xd800 && c < 0xdc00 && i + 1 < n && units[i + 1] >= 0xdc00 && units[i + 1] < 0xe000) {
                        c = 0x10000 + ((c - 0xd800) << 10) + (units[i + 1] - 0xdc00);
                        i++;
                } else if (c >= 0xd800 && c < 0xe000)
                        c = 0xfffd;
                utf8_put(&w, c);
        }
        *w = '\0';
        *ret = s;
        return 0;
}

/* ---- names ---- */

/* The name and inferred name a ScopeInfo holds (V8 10.2-11.3's slots), each "" when it has none. -EBADMSG when the
 * object does not look like that layout. */
static int scope_info_names(const NodeProcess *p, uint64_t si, char **ret_name, char **ret_inferred) {
        uint64_t w[JS_SCOPE_VARIABLES_SLOT], name = 0, inferred = 0;
        uint64_t slot = (uint64_t) p->v.tagged_size;
        int64_t flags, locals;
        size_t idx;
        int r;

        *ret_name = *ret_inferred = NULL;
        for (size_t i = JS_SCOPE_FLAGS_SLOT; i < JS_SCOPE_VARIABLES_SLOT; i++)
                if (!js_field(p, si, (int64_t) (i * slot), &w[i]) || !is_smi(p, w[i]))
                        return -EBADMSG;
        flags = smi_value(p, w[JS_SCOPE_FLAGS_SLOT]);
        locals = smi_value(p, w[JS_SCOPE_CONTEXT_LOCALS_SLOT]);
        if (flags < 0 || locals < 0 || locals > 1 << 20)
                return -EBADMSG;
        if ((flags & JS_SCOPE_IS_EMPTY) || (flags & JS_SCOPE_TYPE_MASK) == JS_SCOPE_TYPE_MODULE)
                /* A module's top level has no name; its variable count would come first. */
                goto empty;
        idx = JS_SCOPE_VARIABLES_SLOT + (locals < JS_SCOPE_INLINED_NAMES_MAX ? (size_t) locals : 1) + (size_t) locals;
        if (flags & JS_SCOPE_SAVED_CLASS_VARIABLE)
                idx++;
        if ((flags >> JS_SCOPE_FUNCTION_VARIABLE_SHIFT) & 3) {
                uint64_t index;

                /* {name, its context or stack slot}: a String or Smi 0, then a Smi. */
                if (!js_field(p, si, (int64_t) (idx * slot), &name) ||
                    !js_field(p, si, (int64_t) ((idx + 1) * slot), &index) || !is_smi(p, index))
                        return -EBADMSG;
                idx += 2;
        }
        if (flags & JS_SCOPE_INFERRED_NAME) {
                if (!js_field(p, si, (int64_t) (idx * slot), &inferred))
                        return -EBADMSG;
        }
        if (name && !is_smi(p, name)) {
                r = js_string(p, name, ret_name);
                if (r < 0)
                        return r == -ENOMEM ? r : -EBADMSG;
        }
        if (inferred && is_string_type(p, js_type(p, inferred))) {
                r = js_string(p, inferred, ret_inferred);
                if (r < 0) {
                        *ret_name = mfree(*ret_name);
                        return r == -ENOMEM ? r : -EBADMSG;
                }
        }
empty:
        if (!*ret_name && !(*ret_name = strdup("")))
                return -ENOMEM;
        if (!*ret_inferred && !(*ret_inferred = strdup(""))) {
                *ret_name = mfree(*ret_name);
                return -ENOMEM;
        }
        return 0;
}

/* SharedFunctionInfo SFI's name as V8's DebugName() gives it: its name, else its inferred name ("Module._load" for a
 * function assigned there). In *RET; -EBADMSG when it cannot be read. */
static int sfi_debug_name(const NodeProcess *p, uint64_t sfi, char **ret) {
        _cleanup_free_ char *name = NULL, *inferred = NULL;
        uint64_t v, data;
        int type, r;

        if (!js_field(p, sfi, p->v.sfi_name, &v))
                return -EBADMSG;
        if (is_smi(p, v))
                name = strdup(""); /* kNoSharedNameSentinel */
        else {
                type = js_type(p, v);
                if (is_string_type(p, type))
                        r = js_string(p, v, &name);
                else if (type == p->v.t_scope_info)
                        r = scope_info_names(p, v, &name, &inferred);
                else
                        r = -EBADMSG;
                if (r < 0)
                        return r;
        }
        if (!name)
                return -ENOMEM;
        if (!name[0] && !inferred && js_field(p, sfi, p->v.sfi_data, &data) &&
            is_uncompiled_type(p, js_type(p, data)) && js_field(p, data, p->v.uncompiled_inferred, &v) &&
            is_string_type(p, js_type(p, v))) {
                r = js_string(p, v, &inferred);
                if (r == -ENOMEM)
                        return r;
        }
        *ret = !name[0] && inferred && inferred[0] ? TAKE_PTR(inferred) : TAKE_PTR(name);
        return 0;
}

static JsFunction *function_get(NodeProcess *p, uint64_t sfi) {
        JsFunction *f;
        uint64_t script, name;
        int r;

        for (size_t i = 0; i < p->n_functions; i++)
                if (p->functions[i].sfi == sfi)
                        return &p->functions[i];
        if (p->n_functions >= JS_SFI_CACHE_MAX) {
                for (size_t i = 0; i < p->n_functions; i++) {
                        free(p->functions[i].name);
                        free(p->functions[i].file);
                }
                p->n_functions = 0;
        }
        if (!p->functions && !(p->functions = calloc(JS_SFI_CACHE_MAX, sizeof *p->functions)))
                return NULL;
        f = &p->functions[p->n_functions++];
        *f = (JsFunction){.sfi = sfi};
        r = sfi_debug_name(p, sfi, &f->name);
        if (r == -ENOMEM)
                return NULL;
        if (r < 0) {
                f->why = "its function's name does not read as V8 10.2-11.3 keep it";
                return f;
        }
        if (js_field(p, sfi, p->v.sfi_script, &script) && js_type(p, script) == p->v.t_script) {
                f->script = script;
                if (js_field(p, script, p->v.script_name, &name) && is_string_type(p, js_type(p, name)) &&
                    js_string(p, name, &f->file) == -ENOMEM)
                        return NULL;
        }
        return f;
}

/* Whether NAME is an identifier as V8's String::IsIdentifier() sees it (ASCII letters, digits, _ and $; any other
 * character counted as a letter, as Unicode's ID_Continue takes most). */
static bool is_identifier(const char *name) {
        if (!name[0] || (name[0] >= '0' && name[0] <= '9'))
                return false;
        for (const char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                      *c == '$' || (unsigned char) *c >= 0x80))
                        return false;
        return true;
}

typedef enum ReceiverKind {
        RECEIVER_TOPLEVEL, /* the global proxy, undefined or null: a plain call */
        RECEIVER_TYPED,    /* a method call on a receiver of a type with a name */
        RECEIVER_UNKNOWN,  /* not read: no type is shown */
} ReceiverKind;

/* The receiver of a call, as V8's CallSiteInfo names its type (JSReceiver::GetConstructorName(): its map's
 * constructor, unless that is Object or unnamed; the class name then), into BUF. */
static ReceiverKind receiver_type(NodeProcess *p, uint64_t recv, char *buf, size_t size) {
        uint64_t ctor, sfi, kind;
        int type;

        if (is_smi(p, recv)) {
                snprintf(buf, size, "Number");
                return RECEIVER_TYPED;
        }
        type = js_type(p, recv);
        if (type < 0)
                return RECEIVER_UNKNOWN;
        if (is_string_type(p, type)) {
                snprintf(buf, size, "String");
                return RECEIVER_TYPED;
        }
        if (type == p->v.t_global_proxy)
                return RECEIVER_TOPLEVEL;
        if (type == p->v.t_oddball) {
                if (!js_field(p, recv, p->v.oddball_kind, &kind) || !is_smi(p, kind))
                        return RECEIVER_UNKNOWN;
                if (smi_value(p, kind) == p->v.oddball_undefined || smi_value(p, kind) == p->v.oddball_null)
                        return RECEIVER_TOPLEVEL;
                if (smi_value(p, kind) == p->v.oddball_true || smi_value(p, kind) == p->v.oddball_false) {
                        snprintf(buf, size, "Boolean");
                        return RECEIVER_TYPED;
                }
                return RECEIVER_UNKNOWN;
        }
        if (is_function_type(p, type)) {
                JsFunction *f;

                /* A class's static method: the class names it ("Repo.load"); any other function is "Function". */
                if (type == p->v.t_function + JS_CLASS_CONSTRUCTOR_AFTER_FUNCTION && (sfi = shared_of(p, recv)) &&
                    (f = function_get(p, sfi)) && f->name && f->name[0]) {
                        snprintf(buf, size, "%s", f->name);
                        return RECEIVER_TYPED;
                }
                snprintf(buf, size, "Function");
                return RECEIVER_TYPED;
        }
        if (!js_field(p, recv, p->v.heap_map, &ctor))
                return RECEIVER_UNKNOWN;
        for (unsigned i = 0; i < JS_CONSTRUCTOR_CHAIN_MAX && js_type(p, ctor) == p->v.t_map; i++)
                if (!js_field(p, ctor, p->v.map_constructor, &ctor))
                        return RECEIVER_UNKNOWN;
        if ((sfi = shared_of(p, ctor))) {
                JsFunction *f = function_get(p, sfi);

                if (f && f->name && f->name[0] && !streq(f->name, "Object")) {
                        snprintf(buf, size, "%s", f->name);
                        return RECEIVER_TYPED;
                }
        }
        snprintf(buf, size, "Object");
        return RECEIVER_TYPED;
}

/* The frame's function as V8 prints it in a stack trace (call-site-info.cc: AppendMethodCall()). */
static char *display_name(const char *name, ReceiverKind rk, const char *type) {
        char *s = NULL;

        if (rk != RECEIVER_TYPED)
                return strdup(name[0] ? name : "<anonymous>");
        if (!name[0])
                return asprintf(&s, "%s.<anonymous>", type) < 0 ? NULL : s;
        if (is_identifier(name) && !streq(name, type))
                return asprintf(&s, "%s.%s", type, name) < 0 ? NULL : s;
        return strdup(name);
}

/* ---- lines ---- */

static int line_ends_from_array(const NodeProcess *p, uint64_t arr, JsScript *s) {
        int64_t n = array_length(p, arr, p->v.t_fixed_array, JS_LINE_ENDS_MAX);
        uint64_t *words;

        if (n < 0)
                return -EBADMSG;
        words = malloc(MAX((size_t) n, (size_t) 1) * sizeof *words);
        s->ends = malloc(MAX((size_t) n, (size_t) 1) * sizeof *s->ends);
        if (!words || !s->ends) {
                free(words);
                return -ENOMEM;
        }
        if (n > 0 && js_read(p, arr - (uint64_t) p->v.heap_tag + (uint64_t) p->v.array_data, words,
                             (size_t) n * sizeof *words) < 0) {
                free(words);
                return -EFAULT;
        }
        for (int64_t i = 0; i < n; i++) {
                if (!is_smi(p, words[i]) || smi_value(p, words[i]) < 0) {
                        free(words);
                        return -EBADMSG;
                }
                s->ends[i] = (uint32_t) smi_value(p, words[i]);
        }
        s->n_ends = (size_t) n;
        free(words);
        return 0;
}

/* Script.line_ends is made when V8 first needs a line (a stack trace); until then the newlines of the source are
 * counted, as llnode does. */
static int line_end_add(JsScript *s, size_t *cap, size_t at) {
        if (s->n_ends == *cap) {
                uint32_t *e;

                *cap = MAX(*cap * 2, (size_t) 64);
                e = reallocarray(s->ends, *cap, sizeof *e);
                if (!e)
                        return -ENOMEM;
                s->ends = e;
        }
        s->ends[s->n_ends++] = (uint32_t) at;
        return 0;
}

static int line_ends_from_source(const NodeProcess *p, uint64_t source, JsScript *s) {
        _cleanup_free_ uint16_t *units = NULL;
        int64_t len = js_string_length(p, source);
        uint64_t data;
        size_t cap = 0, flat;

        if (len < 0 || len > (int64_t) JS_SOURCE_UNITS_MAX)
                return -EBADMSG;
        /* Most sources are flat one-byte strings (Node's own are external ones): their bytes, searched. */
        if (js_flat_one_byte(p, source, &data, &flat) && flat == (size_t) len) {
                _cleanup_free_ char *buf = malloc(JS_SOURCE_CHUNK);

                if (!buf)
                        return -ENOMEM;
                for (size_t from = 0; from < flat; from += JS_SOURCE_CHUNK) {
                        size_t n = MIN((size_t) JS_SOURCE_CHUNK, flat - from);

                        if (proc_mem_read(p->pid, data + from, buf, n) < 0)
                                return -EFAULT;
                        for (const char *c = buf; (c = memchr(c, '\n', n - (size_t) (c - buf))); c++)
                                if (line_end_add(s, &cap, from + (size_t) (c - buf)) < 0)
                                        return -ENOMEM;
                }
                return 0;
        }
        units = malloc(JS_SOURCE_CHUNK * sizeof *units);
        if (!units)
                return -ENOMEM;
        for (size_t from = 0; from < (size_t) len; from += JS_SOURCE_CHUNK) {
                size_t n = MIN((size_t) JS_SOURCE_CHUNK, (size_t) len - from);
                int r = js_string_units(p, source, from, n, units, 0);

                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (units[i] == '\n' && line_end_add(s, &cap, from + i) < 0)
                                return -ENOMEM;
        }
        return 0;
}

static JsScript *script_get(NodeProcess *p, uint64_t script) {
        JsScript *s;
        uint64_t v;
        int r;

        for (size_t i = 0; i < p->n_scripts; i++)
                if (p->scripts[i].addr == script)
                        return &p->scripts[i];
        /* A process that claims more scripts or lines than any has costs no more than this. */
        if (p->n_scripts >= JS_SCRIPTS_MAX || p->n_line_ends > JS_LINE_ENDS_TOTAL_MAX)
                return NULL;
        if (!p->scripts && !(p->scripts = calloc(JS_SCRIPTS_MAX, sizeof *p->scripts)))
                return NULL;
        s = &p->scripts[p->n_scripts++];
        *s = (JsScript){.addr = script};
        r = js_field(p, script, p->v.script_line_ends, &v) ? line_ends_from_array(p, v, s) : -EBADMSG;
        if (r == -ENOMEM)
                return NULL;
        if (r < 0) {
                s->ends = mfree(s->ends);
                s->n_ends = 0;
                r = js_field(p, script, p->v.script_source, &v) ? line_ends_from_source(p, v, s) : -EBADMSG;
                if (r == -ENOMEM)
                        return NULL;
        }
        s->failed = r < 0;
        p->n_line_ends += s->n_ends;
        return s;
}

/* The line and column (1-based) of code offset OFFSET in the source position table POSITIONS (a ByteArray) of a
 * function of SCRIPT, into F; or F's note says why not. -ENOMEM. */
static int frame_line(NodeProcess *p, uint64_t positions, int64_t offset, uint64_t script, JsFrame *f) {
        int64_t position, n;
        JsScript *s;
        size_t lo, hi;
        int r;

        /* The table of the last frame's code is kept: a recursion's frames share one. */
        if (p->table_addr != positions) {
                uint8_t *t;

                if (js_type(p, positions) != p->v.t_byte_array) {
                        f->note = "no source positions kept for its code (V8 collects them lazily)";
                        return 0;
                }
                if ((n = array_length(p, positions, p->v.t_byte_array, JS_POSITIONS_BYTES_MAX)) < 0) {
                        f->note = "its source position table does not read";
                        return 0;
                }
                t = realloc(p->table, MAX((size_t) n, (size_t) 1));
                if (!t)
                        return -ENOMEM;
                p->table = t;
                p->table_addr = 0;
                if (js_read(p, positions - (uint64_t) p->v.heap_tag + (uint64_t) p->v.array_data, t, (size_t) n) < 0) {
                        f->note = "its source position table does not read";
                        return 0;
                }
                p->table_addr = positions;
                p->table_n = (size_t) n;
        }
        r = node_position_for_offset(p->table, p->table_n, offset, &position);
        if (r == -EXDEV) {
                f->note = "code of a function inlined into it runs there: its line is not read";
                return 0;
        }
        if (r < 0 || position < 0) {
                f->note = "its source position table has no entry for the frame's code offset";
                return 0;
        }
        s = script_get(p, script);
        if (!s || s->failed) {
                f->note = "its script's lines cannot be counted";
                return 0;
        }
        /* The first newline at or after the position ends its line. */
        lo = 0;
        hi = s->n_ends;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (s->ends[mid] < (uint64_t) position)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        f->line = (unsigned) lo + 1;
        f->column = (unsigned) ((uint64_t) position - (lo > 0 ? s->ends[lo - 1] + 1ULL : 0)) + 1;
        return 0;
}

/* ---- optimized code ---- */

/* The Code object whose instructions hold PC, its instructions' start in *RET_START; 0 when not found. */
static uint64_t code_of_pc(const NodeProcess *p, uint64_t pc, uint64_t *ret_start) {
        for (uint64_t start = pc & ~(uint64_t) (JS_CODE_ALIGNMENT - 1), k = 0;
             k < JS_CODE_SCAN_BYTES / JS_CODE_ALIGNMENT; k++, start -= JS_CODE_ALIGNMENT) {
                uint64_t code, v;
                int32_t size;

                if (p->v.t_stream >= 0 && p->v.stream_start >= 0) {
                        uint64_t stream = start - (uint64_t) p->v.stream_start + (uint64_t) p->v.heap_tag;

                        if (js_type(p, stream) != p->v.t_stream)
                                continue;
                        if (!js_field(p, stream, JS_STREAM_CODE_OFFSET, &code) || js_type(p, code) != p->v.t_code ||
                            !js_field(p, code, JS_CODE_STREAM_OFFSET, &v) || v != stream ||
                            !js_field(p, code, JS_CODE_START_OFFSET, &v) || v != start ||
                            js_read(p, code - (uint64_t) p->v.heap_tag + JS_CODE_SIZE_OFFSET, &size, sizeof size) < 0)
                                return 0;
                } else if (p->v.code_start >= 0 && p->v.code_size >= 0) {
                        code = start - (uint64_t) p->v.code_start + (uint64_t) p->v.heap_tag;
                        if (js_type(p, code) != p->v.t_code)
                                continue;
                        if (js_read(p, code - (uint64_t) p->v.heap_tag + (uint64_t) p->v.code_size, &size,
                                    sizeof size) < 0)
                                return 0;
                } else
                        return 0;
                /* The first Code object behind the pc: it holds the pc, or nothing does. */
                if (size <= 0 || (uint64_t) size > JS_CODE_BYTES_MAX || pc - start >= (uint64_t) size)
                        return 0;
                *ret_start = start;
                return code;
        }
        return 0;
}

/* The bytecode offset baseline code runs at PC, its BYTECODE the frame's, into *RET; or *RET_NOTE says why not.
 * -ENOMEM. */
static int baseline_bytecode_offset(const NodeProcess *p, uint64_t pc, uint64_t bytecode, int64_t *ret,
                                    const char **ret_note) {
        _cleanup_free_ uint8_t *table = NULL, *codes = NULL;
        uint64_t code, start, tbl;
        int64_t n, nb;
        int r;

        if (!p->bytecode_sizes) {
                *ret_note = "baseline code (Sparkplug), and V8's bytecode sizes are not exported: its line is not read";
                return 0;
        }
        code = code_of_pc(p, pc, &start);
        if (!code || !js_field(p, code, JS_CODE_POSITIONS_OFFSET, &tbl) ||
            (n = array_length(p, tbl, p->v.t_byte_array, JS_POSITIONS_BYTES_MAX)) <= 0 ||
            (nb = array_length(p, bytecode, p->v.t_bytecode, JS_BYTECODE_BYTES_MAX)) <= 0) {
                *ret_note = "baseline code (Sparkplug) whose Code object is not found: its line is not read";
                return 0;
        }
        table = malloc((size_t) n);
        codes = malloc((size_t) nb);
        if (!table || !codes)
                return -ENOMEM;
        if (js_read(p, tbl - (uint64_t) p->v.heap_tag + (uint64_t) p->v.array_data, table, (size_t) n) < 0 ||
            js_read(p, bytecode - (uint64_t) p->v.heap_tag + (uint64_t) p->v.bytecode_header, codes, (size_t) nb) < 0) {
                *ret_note = "baseline code (Sparkplug) whose tables do not read: its line is not read";
                return 0;
        }
        r = node_baseline_offset(table, (size_t) n, codes, (size_t) nb, p->bytecode_sizes, p->n_bytecodes, pc - start,
                                 ret);
        if (r == -ERANGE)
                *ret_note = "baseline code (Sparkplug) whose offset table ends before the pc: its line is not read";
        else if (r < 0)
                *ret_note = "baseline code (Sparkplug) whose tables do not decode: its line is not read";
        return 0;
}

/* ---- frames ---- */

static void js_frame_done(JsFrame *f) {
        free(f->function);
        free(f->name);
        free(f->file);
}

static void js_stack_free(JsStack *st) {
        if (!st)
                return;
        for (size_t i = 0; i < st->n; i++)
                js_frame_done(&st->frames[i]);
        free(st->frames);
        free(st);
}

static bool marker_type(const NodeProcess *p, uint64_t v, int64_t *ret) {
        /* A typed frame's slot holds its type shifted past the Smi tag (StackFrame::TypeToMarker()). */
        if (!is_smi(p, v) || v >= 256)
                return false;
        *ret = (int64_t) (v >> 1);
        return true;
}

/* Whether FP holds a JavaScript frame: a context, and a JSFunction whose shared function info checks out. */
static bool is_js_frame(const NodeProcess *p, uint64_t fp) {
        uint64_t ctx, fn;

        return js_word(p, fp + (uint64_t) p->v.fp_context, &ctx) && is_heap_object(p, ctx) &&
               js_word(p, fp + (uint64_t) p->v.fp_function, &fn) && shared_of(p, fn) != 0;
}

/* Whether a walk may start at FP: an exit frame (JavaScript called out into C++, which the native frames inside it
 * run) or a JavaScript frame. */
static bool is_walk_start(const NodeProcess *p, uint64_t fp) {
        uint64_t m, next;
        int64_t type;

        if (!js_word(p, fp + (uint64_t) p->v.fp_context, &m))
                return false;
        if (marker_type(p, m, &type))
                return (type == p->v.ft_exit || type == p->v.ft_builtin_exit) && js_word(p, fp, &next) && next > fp &&
                       next - fp < JS_FRAME_BYTES_MAX && is_js_frame(p, next);
        return is_js_frame(p, fp);
}

static int js_frame_at(NodeProcess *p, uint64_t fp, uint64_t pc, JsFrame *ret) {
        char type[JS_NAME_UNITS_MAX * 3 + 1] = "";
        uint64_t fn, sfi, recv, bytecode, offset, positions;
        ReceiverKind rk = RECEIVER_UNKNOWN;
        JsFunction *f;

        *ret = (JsFrame){.pc = pc};
        if (!js_word(p, fp + (uint64_t) p->v.fp_function, &fn) || !(sfi = shared_of(p, fn))) {
                ret->note = "the frame's function slot holds no JSFunction";
                goto unknown;
        }
        /* The receiver's type first: naming it reads (and may evict) other functions of the cache. */
        if (js_word(p, fp + (uint64_t) p->v.fp_args, &recv))
                rk = receiver_type(p, recv, type, sizeof type);
        f = function_get(p, sfi);
        if (!f)
                return -ENOMEM;
        if (!f->name) {
                ret->note = f->why;
                goto unknown;
        }
        ret->function = display_name(f->name, rk, type);
        ret->name = strdup(f->name);
        if (!ret->function || !ret->name || (f->file && !(ret->file = strdup(f->file))))
                return -ENOMEM;
        if (!f->script) {
                ret->note = "a builtin";
                return 0;
        }
        /* An interpreted frame keeps its BytecodeArray and the offset of the bytecode it runs (a Smi past the array's
         * header); a baseline (Sparkplug) frame keeps its feedback vector in the offset's slot; an optimized frame
         * neither. */
        if (!js_word(p, fp + (uint64_t) p->v.fp_bytecode_array, &bytecode) ||
            js_type(p, bytecode) != p->v.t_bytecode) {
                uint64_t code, start;

                /* Optimized code (TurboFan, Maglev): the table of its Code maps the pc (a return address but for the
                 * innermost frame; V8 looks one byte back either way). */
                code = code_of_pc(p, pc, &start);
                if (!code || !js_field(p, code, JS_CODE_POSITIONS_OFFSET, &positions)) {
                        ret->note = "optimized code whose Code object is not found: its line is not read";
                        return 0;
                }
                return frame_line(p, positions, (int64_t) (pc - start) - 1, f->script, ret);
        }
        if (!js_field(p, bytecode, JS_BYTECODE_POSITIONS_OFFSET, &positions)) {
                ret->note = "its bytecode cannot be read";
                return 0;
        }
        if (!js_word(p, fp + (uint64_t) p->v.fp_bytecode_offset, &offset) || !is_smi(p, offset)) {
                int64_t b;
                int r;

                /* Baseline code (Sparkplug) keeps its feedback vector in that slot: the pc says the bytecode. */
                r = baseline_bytecode_offset(p, pc, bytecode, &b, &ret->note);
                if (r < 0 || ret->note)
                        return r;
                return frame_line(p, positions, b, f->script, ret);
        }
        return frame_line(p, positions, smi_value(p, offset) - p->v.bytecode_header + p->v.heap_tag, f->script, ret);
unknown:
        ret->function = strdup("<unknown>");
        return ret->function ? 0 : -ENOMEM;
}

static JsFrame *js_stack_add(JsStack *st, size_t *cap) {
        if (st->n == *cap) {
                JsFrame *f;

                *cap = MAX(*cap * 2, (size_t) 16);
                f = reallocarray(st->frames, *cap, sizeof *f);
                if (!f)
                        return NULL;
                st->frames = f;
        }
        return &st->frames[st->n++];
}

/* The V8 frames from FP (whose code runs at PC) out to the entry frame, appended to ST; *RET_END the entry frame's
 * frame pointer. */
static int js_walk(NodeProcess *p, uint64_t fp, uint64_t pc, size_t max, JsStack *st, size_t *cap, uint64_t *ret_end) {
        size_t first = st->n;
        char why[sizeof st->end] = "";
        bool any = false;

        for (unsigned k = 0; k < JS_FRAMES_SEGMENT_MAX; k++) {
                uint64_t m, next, ret;
                int64_t type;

                if (!js_word(p, fp + (uint64_t) p->v.fp_context, &m)) {
                        snprintf(why, sizeof why, "the frame at 0x%" PRIx64 " cannot be read", fp);
                        break;
                }
                if (marker_type(p, m, &type)) {
                        if (type == p->v.ft_entry || type == p->v.ft_construct_entry)
                                break;
                        /* The frame of a `new` call: the frame before it is the constructor's, named "new F". */
                        if (type == p->v.ft_construct && st->n > first && st->frames[st->n - 1].name) {
                                JsFrame *c = &st->frames[st->n - 1];
                                char *name = NULL;

                                if (asprintf(&name, "new %s", c->name[0] ? c->name : "<anonymous>") < 0)
                                        return -ENOMEM;
                                free(c->function);
                                c->function = name;
                        }
                } else if (is_heap_object(p, m)) {
                        JsFrame *f;
                        int r;

                        if (st->n >= max) {
                                st->truncated = true;
                                break;
                        }
                        f = js_stack_add(st, cap);
                        if (!f)
                                return -ENOMEM;
                        r = js_frame_at(p, fp, pc, f);
                        if (r < 0) {
                                js_frame_done(f);
                                st->n--;
                                return r;
                        }
                        any = any || !streq(f->function, "<unknown>");
                } else {
                        snprintf(why, sizeof why, "the frame at 0x%" PRIx64 " is not V8's", fp);
                        break;
                }
                if (!js_word(p, fp, &next) || !js_word(p, fp + 8, &ret) || next <= fp ||
                    next - fp > JS_FRAME_BYTES_MAX) {
                        snprintf(why, sizeof why, "the frame chain breaks at 0x%" PRIx64, fp);
                        break;
                }
                pc = ret;
                fp = next;
        }
        *ret_end = fp;
        /* A run in which nothing checked out was no V8 code after all: neither its frames nor its end are kept. */
        if (!any) {
                for (size_t i = first; i < st->n; i++)
                        js_frame_done(&st->frames[i]);
                st->n = first;
        } else if (why[0])
                memcpy(st->end, why, sizeof st->end);
        return 0;
}

static int node_unwound(void *state, const RuntimeCapture *rc, pid_t tid, const UnwindFrame *frames, size_t n,
                        const UnwindStack *stack, void **raw) {
        NodeProcess *p = state;
        JsStack *st = *raw;
        size_t cap = 0;
        int r = 0;

        (void) tid;
        if (!st) {
                st = calloc(1, sizeof *st);
                if (!st)
                        return -ENOMEM;
                *raw = st;
        }
        /* A thread unwound again is walked again, from nothing. */
        for (size_t i = 0; i < st->n; i++)
                js_frame_done(&st->frames[i]);
        free(st->frames);
        *st = (JsStack) {};
        p->stack = stack;
        for (size_t i = 0; i < n;) {
                uint64_t end;
                size_t before = st->n;

                if (frames[i].fp == 0 || !is_walk_start(p, frames[i].fp)) {
                        i++;
                        continue;
                }
                r = js_walk(p, frames[i].fp, frames[i].pc, rc->max_frames, st, &cap, &end);
                if (r < 0)
                        break;
                if (i == 0 && st->n > before)
                        st->top_in_v8 = true;
                /* On past the entry frame, to a C++ callback's call into JavaScript further out. */
                while (i < n && (frames[i].fp == 0 || frames[i].fp <= end))
                        i++;
        }
        p->stack = NULL;
        return r == -ENOMEM ? r : 0;
}

static void node_thread_done(void *raw) {
        js_stack_free(raw);
}

/* ---- into the native stack ---- */

static int user_frame_of(const JsFrame *jf, UserFrame *ret) {
        *ret = (UserFrame){.kind = FRAME_KIND_JS, .module = -1, .line = jf->line, .column = jf->column};
        ret->function = strdup(jf->function);
        if (!ret->function || (jf->file && !(ret->file = strdup(jf->file)))) {
                user_frame_done(ret);
                return -ENOMEM;
        }
        return 0;
}

/* "f (file:line:col)", as the state names a frame. */
static void put_place(FILE *f, const JsFrame *jf) {
        fprintf(f, "%s (%s", jf->function, jf->file ?: "<anonymous>");
        if (jf->line > 0)
                fprintf(f, ":%u:%u", jf->line, jf->column);
        fputc(')', f);
}

/* Node's own code: a script it names "node:…". */
static bool is_node_internal(const JsFrame *jf) {
        return jf->file && startswith(jf->file, "node:");
}

/* What the event loop does, in the thread's runtime block: running JavaScript, blocked in a synchronous call from it
 * (the innermost frame, and the program's own innermost frame when that one is Node's), or idle in epoll_wait. */
static int event_loop_state(const JsStack *st, ThreadSnapshot *t, ThreadRuntime *rt) {
        const char *call = t->syscall.kind == PROC_SYSCALL_BLOCKED ? syscall_name(t->syscall.nr) : NULL;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (st->n == 0) {
                if (call && startswith(call, "epoll_"))
                        for (size_t i = 0; i < t->n_frames; i++)
                                /* libuv's loop: uv__io_poll is static in a shared libuv, uv_run is not. */
                                if (t->frames[i].function && (streq(t->frames[i].function, "uv__io_poll") ||
                                                              streq(t->frames[i].function, "uv_run")))
                                        return (rt->state = strdup("idle in the event loop (epoll_wait)")) ? 0
                                                                                                           : -ENOMEM;
                return 0;
        }
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        if (st->top_in_v8 || t->state == 'R')
                fputs("running JavaScript: ", f);
        else if (call)
                fprintf(f, "blocked in a synchronous %s() in ", call);
        else
                fputs("in native code called from ", f);
        put_place(f, &st->frames[0]);
        if (is_node_internal(&st->frames[0]))
                for (size_t i = 1; i < st->n; i++)
                        if (!is_node_internal(&st->frames[i]) && st->frames[i].name) {
                                fputs(", called from ", f);
                                put_place(f, &st->frames[i]);
                                break;
                        }
        if (fclose(f) != 0)
                return -ENOMEM;
        rt->state = TAKE_PTR(buf);
        return 0;
}

/* The thread's note: why a walk ended early, and why frames are unknown or lack a line, each reason once. */
static int stack_note(const JsStack *st, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        bool any = false;

        if (!f)
                return -ENOMEM;
        if (st->end[0]) {
                fputs(st->end, f);
                any = true;
        }
        for (size_t i = 0; i < st->n; i++) {
                const JsFrame *jf = &st->frames[i];
                bool seen = false;

                if (!jf->note || streq(jf->note, "a builtin"))
                        continue;
                for (size_t k = 0; k < i && !seen; k++)
                        seen = st->frames[k].note == jf->note;
                if (seen)
                        continue;
                fprintf(f, "%s%s: %s", any ? "; " : "",
                        streq(jf->function, "<unknown>") ? "a frame not read" : jf->function, jf->note);
                any = true;
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = any ? TAKE_PTR(buf) : NULL;
        return 0;
}

static int node_merge_thread(void *state, const RuntimeCapture *rc, void *raw, ThreadSnapshot *t) {
        const JsStack *st = raw ?: &(JsStack){};
        _cleanup_free_ UserFrame *out = NULL;
        size_t n_out = 0, next = 0;
        ThreadRuntime *rt;
        int r;

        (void) state;
        /* Only the threads that run JavaScript, and the main thread (whose event loop is named when idle). */
        if (st->n == 0 && t->tid != rc->pid)
                return 0;
        rt = thread_runtime_add(t, RUNTIME_NODE);
        if (!rt)
                return -ENOMEM;
        rt->known = st->n > 0;
        rt->state = mfree(rt->state);
        rt->note = mfree(rt->note);
        r = stack_note(st, &rt->note);
        if (r < 0)
                return r;
        if (st->n == 0)
                return event_loop_state(st, t, rt);
        out = calloc(t->n_frames + st->n, sizeof *out);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_frames; i++) {
                UserFrame *u = &t->frames[i];

                if (next < st->n && u->kind == FRAME_KIND_NATIVE && !u->inlined) {
                        size_t k = next;

                        /* The native frame whose pc is where the next JavaScript frames run stands for them. */
                        while (k < st->n && st->frames[k].pc != u->pc)
                                k++;
                        if (k < st->n) {
                                for (; next <= k; next++) {
                                        r = user_frame_of(&st->frames[next], &out[n_out]);
                                        if (r < 0)
                                                goto fail;
                                        n_out++;
                                }
                                u->interpreter = true;
                        }
                }
                out[n_out++] = *u;
        }
        for (; next < st->n; next++) {
                r = user_frame_of(&st->frames[next], &out[n_out]);
                if (r < 0)
                        goto fail;
                n_out++;
        }
        if (st->truncated)
                t->truncated = true;
        free(t->frames);
        t->frames = TAKE_PTR(out);
        t->n_frames = n_out;
        return event_loop_state(st, t, rt);
fail:
        for (size_t i = 0; i < n_out; i++)
                if (out[i].kind == FRAME_KIND_JS)
                        user_frame_done(&out[i]);
        for (size_t i = 0; i < t->n_frames; i++)
                t->frames[i].interpreter = false;
        return r;
}

/* ---- finding V8 ---- */

typedef struct NodeFind {
        Dwfl_Module *mod;
        uint64_t addrs[ELEMENTSOF(v8_constants)];
        int found;
} NodeFind;

/* The layout from the constants' values, read from the process (a constant in .bss is 0 only once running). */
static int read_layout(NodeProcess *p, const NodeFind *f, const char **ret_why) {
        ProcMemBlock blocks[ELEMENTSOF(v8_constants)];
        int32_t values[ELEMENTSOF(v8_constants)];
        bool ok[ELEMENTSOF(v8_constants)];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(v8_constants); i++) {
                *(int64_t *) ((uint8_t *) &p->v + v8_constants[i].offset) = -1;
                if (f->addrs[i] == 0) {
                        if (!v8_constants[i].optional) {
                                log_debug("Node process %d: no %s", (int) p->pid, v8_constants[i].symbol);
                                *ret_why = "V8's post-mortem metadata lacks constants this reader needs (a V8 newer "
                                           "or older than 10.2-11.3)";
                                return -EPROTONOSUPPORT;
                        }
                        continue;
                }
                blocks[n++] = (ProcMemBlock){.addr = f->addrs[i], .buf = &values[i], .size = sizeof values[i]};
        }
        if (proc_mem_readv(p->pid, blocks, n, ok) < 0) {
                *ret_why = "V8's post-mortem metadata cannot be read from the process";
                return -EIO;
        }
        n = 0;
        for (size_t i = 0; i < ELEMENTSOF(v8_constants); i++) {
                if (f->addrs[i] == 0)
                        continue;
                if (!ok[n++]) {
                        *ret_why = "V8's post-mortem metadata cannot be read from the process";
                        return -EIO;
                }
                *(int64_t *) ((uint8_t *) &p->v + v8_constants[i].offset) = values[i];
        }
        if (p->v.pointer_size != 8 || p->v.tagged_size != 8) {
                *ret_why = "V8 built with pointer compression, which this reader does not read";
                return -EPROTONOSUPPORT;
        }
        if (p->v.smi_shift_size != 31 || p->v.heap_tag != 1 || p->v.scope_nparams != 1 ||
            p->v.scope_ncontextlocals != 2 || p->v.scope_first_vars != 3 || p->v.bytecode_header <= p->v.heap_tag) {
                *ret_why = "a V8 whose object layout this reader does not know (it reads V8 10.2-11.3: Node 18, 20)";
                return -EPROTONOSUPPORT;
        }
        return 0;
}

/* Bytecodes::kBytecodeSizes, uint8_t[3][N]: N from the symbol's size. Without it a baseline frame has no line.
 * -ENOMEM. */
static int read_bytecode_sizes(NodeProcess *p, Symbolizer *sym, Dwfl_Module *mod) {
        uint64_t addr, size;
        size_t n;

        static const char *const name = JS_BYTECODE_SIZES_SYMBOL;

        if (symbolizer_find_exported(sym, mod, &name, 1, &addr, &size) <= 0 || addr == 0 || size % 3 != 0)
                return 0;
        n = size / 3;
        if (n <= NODE_BYTECODE_PREFIXES || n > JS_BYTECODES_MAX)
                return 0;
        p->bytecode_sizes = malloc(size);
        if (!p->bytecode_sizes)
                return -ENOMEM;
        if (proc_mem_read(p->pid, addr, p->bytecode_sizes, size) < 0) {
                p->bytecode_sizes = mfree(p->bytecode_sizes);
                return 0;
        }
        p->n_bytecodes = n;
        return 0;
}

static void node_process_free(NodeProcess *p) {
        if (!p)
                return;
        free(p->lines);
        free(p->table);
        free(p->bytecode_sizes);
        for (size_t i = 0; i < p->n_functions; i++) {
                free(p->functions[i].name);
                free(p->functions[i].file);
        }
        free(p->functions);
        for (size_t i = 0; i < p->n_scripts; i++)
                free(p->scripts[i].ends);
        free(p->scripts);
        free(p);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(NodeProcess *, node_process_free);

static int node_open(const RuntimeCapture *rc, void **ret) {
        _cleanup_(node_process_freep) NodeProcess *p = NULL;
        const char *names[ELEMENTSOF(v8_constants)];
        NodeFind f = {};
        const char *why = NULL;
        ProcessRuntime *pr;
        bool seen;
        int r;

        *ret = NULL;
        if (!rc->up)
                return 0;
        /* V8 exports them (its dynamic symbols) from node or libnode. */
        for (size_t i = 0; i < ELEMENTSOF(v8_constants); i++)
                names[i] = v8_constants[i].symbol;
        r = runtime_find_exported(rc->up, rc->sym, RUNTIME_NODE, names, ELEMENTSOF(names), &f.mod, f.addrs, &seen);
        if (r < 0)
                return r;
        if (!seen)
                return 0;
        f.found = r;
        pr = snapshot_add_runtime(rc->s, RUNTIME_NODE);
        if (!pr)
                return -ENOMEM;
        if (f.found == 0) {
                pr->error = strdup("no V8 post-mortem metadata (its v8dbg_ symbols): a stripped Node, whose "
                                   "JavaScript frames are not read");
                return pr->error ? 0 : -ENOMEM;
        }
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->pid = rc->pid;
        p->lines = calloc(JS_LINES, sizeof *p->lines);
        if (!p->lines)
                return -ENOMEM;
        r = read_layout(p, &f, &why);
        if (r < 0) {
                pr->error = strdup(why);
                return pr->error ? 0 : -ENOMEM;
        }
        r = read_bytecode_sizes(p, rc->sym, f.mod);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

static void node_close(void *state) {
        node_process_free(state);
}

const RuntimeOps node_runtime_ops = {
        .open = node_open,
        .unwound = node_unwound,
        .thread_done = node_thread_done,
        .merge_thread = node_merge_thread,
        .close = node_close,
};
