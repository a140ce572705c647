/* ruby-layouts.c: CRuby's layouts per release, 3.0 to 3.4 on LP64, from the bindgen output of each release's
 * headers (rbspy's ruby-structs/src/ruby_3_X_Y.rs: their #[repr(C)] structs measured with offset_of!/size_of for
 * every patch release there) and, for what those bindings leave out (thread_sync.c's rb_mutex_t, symbol.h's
 * rb_symbols_t, symbol.c's ID_ENTRY_*, the public headers' RArray flags and RTypedData), from the release sources.
 * Each row cites its headers; the rows of 3.1, 3.3 and 3.4 were also checked with offsetof over the configured
 * sources of 3.1.2, 3.3.8 and 3.4.5. The patch releases of a minor agree on every field: one row per minor. */
#include "base/macro.h"
#include "runtime/ruby-layouts.h"

/* What every release from 3.0 to 3.4 shares.
 * vm_core.h: rb_vm_t begins with self, then the ractor struct whose set (a list head, 16 bytes), cnt, blocking_cnt
 * put main_ractor at 32 and main_thread at 40; rb_thread_t begins with lt_node; rb_execution_context_t with
 * vm_stack, vm_stack_size, cfp; rb_control_frame_t with pc, sp, iseq, self, ep (0, 8, 16, 24, 32); rb_iseq_t is
 * flags, wrapper, body; rb_iseq_constant_body is type, iseq_size, iseq_encoded, param (48 bytes), then location.
 * rb_iseq_location_t: pathobj 0, base_label 8, label 16, first_lineno 24; struct iseq_insn_info: body 0,
 * positions 8, size 16, succ_index_table 24; struct iseq_insn_info_entry: line_no 0; struct rb_waiting_list: next 0,
 * thread 8, fiber 16.
 * method.h: rb_method_entry_t is flags, defined_class, def, called_id, owner; rb_method_definition_t is its bit
 * fields (8 bytes), the body union (24 bytes), then original_id.
 * include/ruby/internal/core/rtypeddata.h: struct RTypedData is basic, type, typed_flag, data (3.3 added embedded
 * typed data, typed_flag & 2, whose struct follows the RTypedData instead: Mutex is not one, its mutex_data_type
 * has no RUBY_TYPED_EMBEDDABLE in 3.3 and 3.4).
 * include/ruby/internal/core/rarray.h: RARRAY_EMBED_LEN_SHIFT is RUBY_FL_USHIFT + 3 (fl_type.h: RUBY_FL_USHIFT 12).
 * thread_sync.c: rb_mutex_t is fiber, next_mutex, waitq (a list head, ccan_list_head from 3.2).
 * symbol.h: rb_symbols_t is last_id (rb_id_serial_t, a uint32_t), str_sym, ids, dsymbol_fstr_hash.
 * symbol.c: ID_ENTRY_UNIT 512; enum id_entry_type is ID_ENTRY_STR, ID_ENTRY_SYM, ID_ENTRY_SIZE (2).
 * id.h: RUBY_ID_SCOPE_SHIFT 4. */
#define RUBY_COMMON                                                                                             \
        .vm_main_ractor = 32, .vm_main_thread = 40, .thread_lt_node = 0, .ec_vm_stack = 0,                      \
        .ec_vm_stack_size = 8, .ec_cfp = 16, .iseq_body = 16, .body_iseq_size = 4, .body_iseq_encoded = 8,      \
        .body_location = 64, .typed_data_data = 32, .array_embed_len_shift = 15, .me_def = 16,                  \
        .me_called_id = 24, .me_owner = 32, .def_original_id = 32, .mutex_fiber = 0, .waiting_list_next = 0,    \
        .waiting_list_thread = 8, .symbols_ids = 16, .id_entry_unit = 512, .id_entry_size = 2,                  \
        .id_scope_shift = 4

static const RubyLayout layouts[] = {
        /* 3.0.0 to 3.0.7 (v3_0_0 … v3_0_7; ruby_3_0_0.rs … ruby_3_0_7.rs).
         * vm_core.h: rb_ractor_t (ractor_core.h) threads at 304: set +0, gvl (rb_global_vm_lock_t) +32 with owner
         * first, main +224; rb_thread_t: ec 40, thread_id (pthread_t) 80 and no tid, the status bit field at 88
         * (status: its low 2 bits), locking_mutex 256, join_list 272; rb_execution_context_t: tag 24, protect_tag
         * 32, interrupt_flag, interrupt_mask, fiber_ptr 48; rb_control_frame_t: block_code, __bp__: 56 bytes.
         * iseq.h: location.first_lineno a VALUE; insns_info at 120; iseq_insn_info_entry is line_no, events (no
         * node_id): 8 bytes.
         * include/ruby/internal/core/rstring.h: the embedded length in the flags (RSTRING_EMBED_LEN_MASK, shift 14),
         * as.ary at 16; as.heap.len 16, as.heap.ptr 24.
         * include/ruby/internal/core/rarray.h: RARRAY_EMBED_LEN_MASK = RUBY_FL_USER4 | RUBY_FL_USER3 (as.ary holds 3).
         * thread_sync.c: rb_mutex_t { rb_fiber_t *fiber; … }. */
        {
                .major = 3, .minor = 0, .patch_min = 0, .patch_max = 7,
                RUBY_COMMON,
                .ractor_threads_set = 304,
                .ractor_gvl_owner = 336,
                .ractor_threads_main = 528,
                .thread_ec = 40,
                .thread_tid = RUBY_OFF_NONE,
                .thread_nt = RUBY_OFF_NONE,
                .native_thread_tid = RUBY_OFF_NONE,
                .thread_status = 88,
                .thread_locking_mutex = 256,
                .thread_join_list = 272,
                .ec_fiber_ptr = 48,
                .cfp_size = 56,
                .first_lineno_fixnum = true,
                .body_insns_info = 120,
                .insn_info_entry_size = 8,
                .string = RUBY_STRING_FLAGS_LEN,
                .array_embed_len_mask = 0x3,
        },
        /* 3.1.0 to 3.1.7 (v3_1_0 … v3_1_7; ruby_3_1_0.rs … ruby_3_1_7.rs).
         * vm_core.h: rb_ractor_t (ractor_core.h) threads at 304: set +0, gvl.owner +32, main +224; rb_thread_t: ec 40,
         * thread_id 80, tid 88 (int), the status bit field at 92, locking_mutex 264, join_list 280 (root_jmpbuf gone);
         * rb_execution_context_t: protect_tag gone, fiber_ptr 40; rb_control_frame_t gains jit_return: 64 bytes.
         * iseq.h: location.first_lineno still a VALUE, node_id after it; insns_info at 120; iseq_insn_info_entry is
         * line_no, node_id, events: 12 bytes.
         * include/ruby/internal/core/rstring.h: as 3.0 (embedded bytes now as.embed.ary, still at 16; USE_RVARGC 0).
         * include/ruby/internal/core/rarray.h: RARRAY_EMBED_LEN_MASK = RUBY_FL_USER4 | RUBY_FL_USER3.
         * thread_sync.c: rb_mutex_t { rb_fiber_t *fiber; … }. */
        {
                .major = 3, .minor = 1, .patch_min = 0, .patch_max = 7,
                RUBY_COMMON,
                .ractor_threads_set = 304,
                .ractor_gvl_owner = 336,
                .ractor_threads_main = 528,
                .thread_ec = 40,
                .thread_tid = 88,
                .thread_nt = RUBY_OFF_NONE,
                .native_thread_tid = RUBY_OFF_NONE,
                .thread_status = 92,
                .thread_locking_mutex = 264,
                .thread_join_list = 280,
                .ec_fiber_ptr = 40,
                .cfp_size = 64,
                .first_lineno_fixnum = true,
                .body_insns_info = 120,
                .insn_info_entry_size = 12,
                .string = RUBY_STRING_FLAGS_LEN,
                .array_embed_len_mask = 0x3,
        },
        /* 3.2.0 to 3.2.11 (v3_2_0 … v3_2_11; ruby_3_2_0.rs … ruby_3_2_11.rs).
         * vm_core.h: rb_ractor_t (ractor_core.h) threads at 304: set +0, sched (struct rb_thread_sched,
         * thread_pthread.h) +32 with running first, main +224; rb_thread_t gains nt (struct rb_native_thread *) at
         * 40 before ec 48, and loses thread_id and tid, which moved to nt (thread_pthread.h: rb_native_thread's tid
         * at 16), so thread_tid is NONE; the status bit field at 112, locking_mutex 216, join_list 232;
         * rb_control_frame_t: 64 bytes.
         * iseq.h: location.first_lineno an int; insns_info at 112; iseq_insn_info_entry: 12 bytes.
         * include/ruby/internal/core/rstring.h (USE_RVARGC 1): as.embed.len at 16, bytes at 24; heap len 16, ptr 24.
         * include/ruby/internal/core/rarray.h: RARRAY_EMBED_LEN_MASK = RUBY_FL_USER3 … RUBY_FL_USER9 (7 bits).
         * thread_sync.c: rb_mutex_t { rb_fiber_t *fiber; … }. */
        {
                .major = 3, .minor = 2, .patch_min = 0, .patch_max = 11,
                RUBY_COMMON,
                .ractor_threads_set = 304,
                .ractor_gvl_owner = 336,
                .ractor_threads_main = 528,
                .thread_ec = 48,
                .thread_tid = RUBY_OFF_NONE,
                .thread_nt = 40,
                .native_thread_tid = 16,
                .thread_status = 112,
                .thread_locking_mutex = 216,
                .thread_join_list = 232,
                .ec_fiber_ptr = 40,
                .cfp_size = 64,
                .first_lineno_fixnum = false,
                .body_insns_info = 112,
                .insn_info_entry_size = 12,
                .string = RUBY_STRING_EMBED_LEN,
                .array_embed_len_mask = 0x7f,
        },
        /* 3.3.0 to 3.3.12 (v3_3_0 … v3_3_12; ruby_3_3_0.rs … ruby_3_3_12.rs).
         * vm_core.h: rb_ractor_t (ractor_core.h) threads at 256: set +0, sched +32 (thread_pthread.h: lock_ then
         * running at +40), main +136; rb_thread_t: nt 40 (rb_native_thread's tid at 24), ec 48, the status bit field
         * at 240, locking_mutex 344, join_list 360; rb_control_frame_t loses __bp__: 56 bytes.
         * iseq.h: location.first_lineno an int; insns_info at 112; iseq_insn_info_entry: 12 bytes.
         * include/ruby/internal/core/rstring.h: len at 16 for both; as.heap.ptr and as.embed.ary at 24.
         * include/ruby/internal/core/rarray.h: RARRAY_EMBED_LEN_MASK = RUBY_FL_USER3 … RUBY_FL_USER9 (7 bits).
         * thread_sync.c: rb_mutex_t { rb_fiber_t *fiber; … }. */
        {
                .major = 3, .minor = 3, .patch_min = 0, .patch_max = 12,
                RUBY_COMMON,
                .ractor_threads_set = 256,
                .ractor_gvl_owner = 328,
                .ractor_threads_main = 392,
                .thread_ec = 48,
                .thread_tid = RUBY_OFF_NONE,
                .thread_nt = 40,
                .native_thread_tid = 24,
                .thread_status = 240,
                .thread_locking_mutex = 344,
                .thread_join_list = 360,
                .ec_fiber_ptr = 40,
                .cfp_size = 56,
                .first_lineno_fixnum = false,
                .body_insns_info = 112,
                .insn_info_entry_size = 12,
                .string = RUBY_STRING_LEN,
                .array_embed_len_mask = 0x7f,
        },
        /* 3.4.0 to 3.4.10 (v3_4_0 … v3_4_10; ruby_3_4_0.rs … ruby_3_4_10.rs).
         * vm_core.h: rb_ractor_t (ractor_core.h) as 3.3: threads at 256, sched.running +72, main +136; rb_thread_t
         * as 3.3 up to locking_mutex 344, then keeping_mutexes and the new interrupt_exec_tasks (a list head) put
         * join_list at 376; rb_control_frame_t: 56 bytes.
         * iseq.h: location.first_lineno an int; insns_info at 112; iseq_insn_info_entry: 12 bytes.
         * include/ruby/internal/core/rstring.h: as 3.3.
         * include/ruby/internal/core/rarray.h: RARRAY_EMBED_LEN_MASK = RUBY_FL_USER3 … RUBY_FL_USER9 (7 bits).
         * thread_sync.c: rb_mutex_t { rb_fiber_t *fiber; … } (a later thread_sync.c has ec_serial there instead). */
        {
                .major = 3, .minor = 4, .patch_min = 0, .patch_max = 10,
                RUBY_COMMON,
                .ractor_threads_set = 256,
                .ractor_gvl_owner = 328,
                .ractor_threads_main = 392,
                .thread_ec = 48,
                .thread_tid = RUBY_OFF_NONE,
                .thread_nt = 40,
                .native_thread_tid = 24,
                .thread_status = 240,
                .thread_locking_mutex = 344,
                .thread_join_list = 376,
                .ec_fiber_ptr = 40,
                .cfp_size = 56,
                .first_lineno_fixnum = false,
                .body_insns_info = 112,
                .insn_info_entry_size = 12,
                .string = RUBY_STRING_LEN,
                .array_embed_len_mask = 0x7f,
        },
};

const RubyLayout *ruby_layout_for(unsigned major, unsigned minor, unsigned patch) {
        for (size_t i = 0; i < ELEMENTSOF(layouts); i++) {
                const RubyLayout *l = &layouts[i];

                if (l->major == major && l->minor == minor && patch >= l->patch_min && patch <= l->patch_max)
                        return l;
        }
        return NULL;
}
