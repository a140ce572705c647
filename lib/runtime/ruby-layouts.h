/* ruby-layouts.h: where CRuby keeps what a reader from outside needs, per release: the VM's main ractor and its
 * threads, each thread's execution context and control frames, instruction sequences and their line tables, strings
 * and arrays, method entries, Mutex and the symbol table. One row per range of releases whose offsets agree
 * (ruby-layouts.c cites the headers each comes from); a layout read from the binary's DWARF, where it has one, takes
 * the row's place. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An offset this release does not have. */
#define RUBY_OFF_NONE UINT16_MAX

/* How a String keeps its length. */
typedef enum RubyStringLayout {
        RUBY_STRING_FLAGS_LEN,  /* ≤3.1: embedded length in the flags (RSTRING_EMBED_LEN_MASK, shift 14), bytes at 16;
                                 * heap: as.heap.len at 16, as.heap.ptr at 24 */
        RUBY_STRING_EMBED_LEN,  /* 3.2: embedded as.embed.len at 16, bytes at 24; heap: len 16, ptr 24 */
        RUBY_STRING_LEN,        /* 3.3+: len at 16 for both; heap ptr at 24, embedded bytes at 24 */
} RubyStringLayout;

/* Offsets in bytes from the start of each structure (LP64: x86-64 and arm64 agree for every field read here; the
 * default build: no VM_DEBUG_BP_CHECK, no RUBY_DEBUG). */
typedef struct RubyLayout {
        uint8_t major, minor;           /* the releases major.minor.(patch_min..patch_max) */
        uint8_t patch_min, patch_max;

        /* rb_vm_t */
        uint16_t vm_main_ractor;        /* ractor.main_ractor */
        uint16_t vm_main_thread;        /* ractor.main_thread */

        /* rb_ractor_t */
        uint16_t ractor_threads_set;    /* threads.set: the ccan list head of its threads (rb_thread_t.lt_node) */
        uint16_t ractor_gvl_owner;      /* the thread holding the GVL: threads.gvl.owner (≤3.1),
                                         * threads.sched.running (3.2+) */
        uint16_t ractor_threads_main;   /* threads.main */

        /* rb_thread_t */
        uint16_t thread_lt_node;        /* its node in the ractor's list */
        uint16_t thread_ec;             /* rb_execution_context_t * */
        uint16_t thread_tid;            /* int: the TID (3.1, Thread#native_thread_id), else NONE */
        uint16_t thread_nt;             /* struct rb_native_thread *: where the TID moved (3.2+), else NONE */
        uint16_t native_thread_tid;     /* int: the TID in it (3.2+), else NONE */
        uint16_t thread_status;         /* the unsigned int whose low 2 bits are status (enum rb_thread_status) */
        uint16_t thread_locking_mutex;  /* VALUE: the Mutex it waits to lock, Qfalse: none */
        uint16_t thread_join_list;      /* struct rb_waiting_list *: the threads joining it */

        /* rb_execution_context_t */
        uint16_t ec_vm_stack;           /* VALUE * */
        uint16_t ec_vm_stack_size;      /* size_t, in VALUEs */
        uint16_t ec_cfp;                /* rb_control_frame_t *: the newest frame */
        uint16_t ec_fiber_ptr;          /* rb_fiber_t *: the fiber running on it (a Mutex records its owner's) */

        /* rb_control_frame_t: pc at 0, iseq at 16, ep at 32 in every 3.x */
        uint16_t cfp_size;

        /* rb_iseq_t → struct rb_iseq_constant_body */
        uint16_t iseq_body;
        uint16_t body_iseq_size;        /* unsigned int */
        uint16_t body_iseq_encoded;     /* VALUE * */
        uint16_t body_location;         /* rb_iseq_location_t: pathobj +0, base_label +8, label +16,
                                         * first_lineno +24 */
        bool first_lineno_fixnum;       /* location.first_lineno a Fixnum VALUE (≤3.1), else an int */
        uint16_t body_insns_info;       /* struct iseq_insn_info: body +0, positions +8, size +16,
                                         * succ_index_table +24 */
        uint16_t insn_info_entry_size;  /* struct iseq_insn_info_entry: line_no (int) at 0 */

        /* objects */
        RubyStringLayout string;
        uint16_t typed_data_data;       /* struct RTypedData: void *data */
        uint8_t array_embed_len_shift;  /* RArray: embedded (RARRAY_EMBED_FLAG, FL_USER1) length in the flags */
        uint16_t array_embed_len_mask;  /* (flags >> shift) & mask; elements at 16; heap: as.heap.len at 16,
                                         * as.heap.ptr at 32 */

        /* rb_method_entry_t → rb_method_definition_t */
        uint16_t me_def;
        uint16_t me_called_id;          /* ID */
        uint16_t me_owner;              /* VALUE: the class */
        uint16_t def_original_id;       /* ID */

        /* rb_mutex_t (Thread::Mutex's data) */
        uint16_t mutex_fiber;           /* rb_fiber_t *: its owner's fiber, NULL: unlocked */

        /* struct rb_waiting_list */
        uint16_t waiting_list_next;
        uint16_t waiting_list_thread;   /* rb_thread_t * */

        /* the symbol table (ruby_global_symbols, not exported: found by its shape) */
        uint16_t symbols_ids;           /* VALUE ids: an Array of Arrays, ID_ENTRY_UNIT ids each */
        uint16_t id_entry_unit;         /* 512 */
        uint16_t id_entry_size;         /* VALUEs per id in those arrays, the String first */
        uint8_t id_scope_shift;         /* RUBY_ID_SCOPE_SHIFT: an ID past tLAST_OP_ID is serial << shift | scope */
} RubyLayout;

/* The row for release MAJOR.MINOR.PATCH, NULL when there is none. */
const RubyLayout *ruby_layout_for(unsigned major, unsigned minor, unsigned patch);
