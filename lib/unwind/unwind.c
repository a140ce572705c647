/* unwind.c: the unwinder interface: per-process context, memory reads, backend dispatch, FP and scan fallbacks. */
#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/macro.h"
#include "proc/peers-tables.h"
#include "proc/proc-read.h"
#include "unwind/unwind-internal.h"

/* Budgets of the last-resort fallbacks. */
#define FP_FRAMES_MAX 256
#define SCAN_FRAMES_MAX 32
#define SCAN_BYTES_MAX (16 * 1024)
#define MAPS_BYTES_MAX (64U * 1024 * 1024)


#define DELETED_SUFFIX " (deleted)"
/* The name libdwfl knows a file not to be read by: no such path exists, and find_elf() opens none. */
#define UNWIND_NOT_READ_PREFIX "//stackwatch-not-read/"

/* Remember that libdwfl knows the module shown as NAME under ALIAS; WHY (NULL: it is read) says why it is not read. */
static int add_alias(UnwindProcess *p, const char *alias, const char *name, const char *why) {
        char **na;

        if (!GREEDY_REALLOC(p->aliases, p->n_aliases_allocated, 3 * (p->n_aliases + 1)))
                return -ENOMEM;
        na = p->aliases + 3 * p->n_aliases;
        na[0] = strdup(alias);
        na[1] = strdup(name);
        na[2] = why ? strdup(why) : NULL;
        if (!na[0] || !na[1] || (why && !na[2])) {
                free(na[0]);
                free(na[1]);
                free(na[2]);
                return -ENOMEM;
        }
        p->n_aliases++;
        return 0;
}

/* Why the file on device MAJOR:MINOR is not to be read at all, or NULL: it sits on a FUSE mount whose daemon would
 * not answer, and any look at it (a stat() of its path, an open(), a read of a page not in memory) would wait for that
 * daemon with the target, in D state once the daemon has read our request. The target's FUSE mounts are read once,
 * at its first file; each connection is asked about once. */
static const char *fuse_not_answering(UnwindProcess *p, unsigned major, unsigned minor) {
        _cleanup_(peer_resolver_freep) PeerResolver *r = NULL;
        const FuseMount *m;
        size_t i;
        char why[256];

        if (!p->fuse_mounts_loaded) {
                p->fuse_mounts_loaded = true;
                if (fuse_mounts_load(p->pid, &p->fuse_mounts, &p->n_fuse_mounts) < 0)
                        p->n_fuse_mounts = 0;
                if (p->n_fuse_mounts > 0) {
                        p->fuse_answering = malloc(p->n_fuse_mounts * sizeof *p->fuse_answering);
                        p->fuse_why = calloc(p->n_fuse_mounts, sizeof *p->fuse_why);
                        if (!p->fuse_answering || !p->fuse_why) {
                                p->n_fuse_mounts = 0; /* and unwind_process_free() frees what there is */
                                return "not enough memory to tell whether its FUSE daemon answers";
                        }
                        for (i = 0; i < p->n_fuse_mounts; i++)
                                p->fuse_answering[i] = -1;
                }
        }
        m = fuse_mounts_by_dev(p->fuse_mounts, p->n_fuse_mounts, major, minor);
        if (!m)
                return NULL;
        i = (size_t) (m - p->fuse_mounts);
        if (p->fuse_answering[i] < 0) {
                int k = peer_resolver_new(&r);

                if (k >= 0)
                        k = fuse_connection_answering(r, fuse_mount_connection(m), why, sizeof why);
                if (k < 0)
                        snprintf(why, sizeof why, "cannot tell whether its daemon answers: %s", strerror(-k));
                p->fuse_answering[i] = k > 0;
                if (k <= 0 && asprintf(&p->fuse_why[i], "on %s mount %s, and %s", m->fstype, m->mountpoint, why) < 0)
                        p->fuse_why[i] = NULL;
                if (k <= 0)
                        log_debug("Not reading the files of %d on %s: %s", (int) p->pid, m->mountpoint, why);
        }
        return p->fuse_answering[i] ? NULL : p->fuse_why[i] ?: "on a FUSE mount whose daemon does not answer";
}

/* A file on a FUSE mount whose daemon takes requests is read by a child, into a memfd, with a deadline: a daemon that
 * takes requests may answer none (fuse_copy_file()), and then a stat() or open() of the file, or a read of its pages,
 * would wait for it with us. PATH reaches it (/proc/PID/root/… or map_files), INO on MAJOR:MINOR is the file mapped.
 * The memfd's alias, in *RET_ALIAS; or why it is not read, in *RET_WHY, and the mount is given up on for the rest. */
static int fuse_file_copy(UnwindProcess *p, const char *path, uint64_t ino, unsigned major, unsigned minor,
                          char *ret_alias, size_t size, const char **ret_why) {
        const FuseMount *m = fuse_mounts_by_dev(p->fuse_mounts, p->n_fuse_mounts, major, minor);
        struct stat want = { .st_ino = (ino_t) ino, .st_dev = makedev(major, minor) };
        size_t i = (size_t) (m - p->fuse_mounts);
        int fd, k;

        k = fuse_copy_file(path, &want, FUSE_COPY_TIMEOUT_USEC, &fd);
        if (k >= 0) {
                if (!GREEDY_REALLOC(p->fuse_copies, p->n_fuse_copies_allocated, p->n_fuse_copies + 1)) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                p->fuse_copies[p->n_fuse_copies++] = fd;
                snprintf(ret_alias, size, "/proc/self/fd/%d", fd);
                *ret_why = NULL;
                return 0;
        }
        p->fuse_answering[i] = 0;
        free(p->fuse_why[i]);
        if (k == -ETIMEDOUT)
                k = asprintf(&p->fuse_why[i], "on %s mount %s, and its daemon took the request to read it but did not "
                             "answer within %u ms", m->fstype, m->mountpoint, FUSE_COPY_TIMEOUT_USEC / 1000);
        else
                k = asprintf(&p->fuse_why[i], "on %s mount %s, which could not be read: %s", m->fstype, m->mountpoint,
                             strerror(-k));
        if (k < 0)
                p->fuse_why[i] = NULL;
        log_debug("Not reading %s: %s", path, p->fuse_why[i] ?: "?");
        *ret_why = p->fuse_why[i] ?: "on a FUSE mount whose daemon does not answer";
        return 0;
}

/* One file-backed line of the maps text: the mapping and the file, as maps names it. */
typedef struct MappedFile {
        unsigned long long start, end, ino;
        unsigned major, minor;
        const char *name;       /* the path, unmangled (" (deleted)" kept: it is the name shown) */
        bool deleted;           /* the file is gone from its directory: no path reaches it */
        bool newline;           /* a newline in the name: it must not reach the maps text libdwfl reads */
} MappedFile;

/* The alias NAME has already (the last one given), and in *RET_WHY why it is not read; NULL when it has none. */
static const char *alias_find(const UnwindProcess *p, const char *name, const char **ret_why) {
        const char *alias = NULL;

        for (size_t i = 0; i < p->n_aliases; i++)
                if (streq(p->aliases[3 * i + 1], name)) {
                        alias = p->aliases[3 * i];
                        *ret_why = p->aliases[3 * i + 2];
                }
        return alias;
}

/* The alias add_alias() gave last. */
static const char *alias_last(const UnwindProcess *p) {
        return p->aliases[3 * (p->n_aliases - 1)];
}

/* [START, END) of the target is read only where resident: a page not in memory would be read from its file. */
static int unread_add(UnwindProcess *p, uint64_t start, uint64_t end) {
        if (!GREEDY_REALLOC(p->unread, p->n_unread_allocated, p->n_unread + 1))
                return -ENOMEM;
        p->unread[p->n_unread][0] = start;
        p->unread[p->n_unread++][1] = end;
        return 0;
}

/* F sits on a FUSE mount whose daemon takes requests: read by a child into a memfd (fuse_file_copy()), whose alias
 * goes in *RET_ALIAS; or why it is not read, in *RET_WHY. */
static int alias_fuse_copy(UnwindProcess *p, const MappedFile *f, const char **ret_alias, const char **ret_why) {
        _cleanup_free_ char *via = NULL;
        char repl[96];
        int r;

        if ((f->deleted || f->newline || asprintf(&via, "/proc/%d/root%s", (int) p->pid, f->name) < 0) &&
            asprintf(&via, "/proc/%d/map_files/%llx-%llx", (int) p->pid, f->start, f->end) < 0)
                return -ENOMEM;
        r = fuse_file_copy(p, via, f->ino, f->major, f->minor, repl, sizeof repl, ret_why);
        if (r < 0 || *ret_why)
                return r;
        r = add_alias(p, repl, f->name, NULL);
        if (r < 0)
                return r;
        *ret_alias = alias_last(p);
        return 0;
}

/* F reached as the target sees it: its path below /proc/PID/root when that is the very file mapped (device and
 * inode as maps has them), else (deleted, unmounted since, replaced, an overlay's other face) the mapping itself,
 * through map_files; never a namesake. */
static int alias_rooted(UnwindProcess *p, const MappedFile *f, const char **ret_alias) {
        _cleanup_free_ char *rooted = NULL;
        char repl[96];
        struct stat st;
        int r;

        if (!f->deleted && !f->newline && asprintf(&rooted, "/proc/%d/root%s", (int) p->pid, f->name) < 0)
                return -ENOMEM;
        if (rooted && (stat(rooted, &st) < 0 || st.st_ino != f->ino || major(st.st_dev) != f->major ||
                       minor(st.st_dev) != f->minor))
                rooted = mfree(rooted);
        if (!rooted)
                snprintf(repl, sizeof repl, "/proc/%d/map_files/%llx-%llx", (int) p->pid, f->start, f->end);
        r = add_alias(p, rooted ?: repl, f->name, NULL);
        if (r < 0)
                return r;
        *ret_alias = alias_last(p);
        return 0;
}

/* A first alias for F, in *RET_ALIAS, and why it is not read (NULL: it is) in *RET_WHY: a file on a FUSE mount whose
 * daemon would not answer is not even opened through map_files (that is an open() of the file too). */
static int alias_new(UnwindProcess *p, const MappedFile *f, const char **ret_alias, const char **ret_why) {
        char repl[96];
        int r;

        *ret_why = fuse_not_answering(p, f->major, f->minor);
        if (!*ret_why && fuse_mounts_by_dev(p->fuse_mounts, p->n_fuse_mounts, f->major, f->minor)) {
                r = alias_fuse_copy(p, f, ret_alias, ret_why);
                if (r < 0 || !*ret_why)
                        return r;
        }
        if (!*ret_why)
                return alias_rooted(p, f, ret_alias);
        snprintf(repl, sizeof repl, UNWIND_NOT_READ_PREFIX "%llx-%llx", f->start, f->end);
        r = add_alias(p, repl, f->name, *ret_why);
        if (r < 0)
                return r;
        *ret_alias = alias_last(p);
        *ret_why = p->aliases[3 * (p->n_aliases - 1) + 2];
        return 0;
}

/* The alias of the file the maps line L (up to EOL) maps, in *RET_ALIAS, and the length of the line before its path
 * in *RET_HEAD; *RET_ALIAS NULL for a line that maps no file. */
static int line_alias(UnwindProcess *p, const char *l, const char *eol, size_t *ret_head, const char **ret_alias) {
        size_t ll = (size_t) (eol - l), sl = strlen(DELETED_SUFFIX);
        const char *path = memchr(l, '/', ll), *alias, *why = NULL;
        _cleanup_free_ char *name = NULL;
        MappedFile f;
        int r;

        *ret_alias = NULL;
        if (!path)
                return 0;
        name = strndup(path, (size_t) (eol - path));
        if (!name)
                return -ENOMEM;
        f = (MappedFile) { .name = name, .deleted = ll > sl && memcmp(eol - sl, DELETED_SUFFIX, sl) == 0,
                           .newline = strchr(proc_maps_path_unmangle(name), '\n') };
        if (sscanf(l, "%llx-%llx %*s %*x %x:%x %llu", &f.start, &f.end, &f.major, &f.minor, &f.ino) != 5)
                return 0;
        alias = alias_find(p, name, &why);
        if (!alias) {
                r = alias_new(p, &f, &alias, &why);
                if (r < 0)
                        return r;
        }
        /* Every mapping of a file not read, or read from a FUSE mount (whose daemon may stop answering). */
        if (why || fuse_mounts_by_dev(p->fuse_mounts, p->n_fuse_mounts, f.major, f.minor)) {
                r = unread_add(p, f.start, f.end);
                if (r < 0)
                        return r;
        }
        *ret_head = (size_t) (path - l);
        *ret_alias = alias;
        return 0;
}

/* Every file is opened as the target sees it, never by its name on the host, where another file may sit at the same
 * path (a container, a chroot, our own unit's PrivateTmp=) or none at all. A file that still exists is reached
 * through /proc/PID/root, in the target's mount namespace and root; a deleted one (a package upgraded under a running
 * service, a memfd) cannot be opened by name, but /proc/PID/map_files/START-END still serves the whole file, symbol
 * table included. Rewrite every file's path in the maps text we hand to libdwfl, every mapping of one file to one
 * alias, and remember the original name for display. libdwfl and the symbolizer check the build-id of what they
 * open. */
static int maps_alias_paths(UnwindProcess *p, const char *text, size_t len, char **ret, size_t *ret_len) {
        _cleanup_free_ char *out = NULL;
        size_t olen = 0, oalloc = len + 1;

        out = malloc(oalloc);
        if (!out)
                return -ENOMEM;
        for (const char *l = text; l < text + len;) {
                const char *eol = memchr(l, '\n', (size_t) (text + len - l)) ?: text + len, *alias;
                size_t head = (size_t) (eol - l);
                int r = line_alias(p, l, eol, &head, &alias);

                if (r < 0)
                        return r;
                /* The line up to the path, then the alias; or the whole line. */
                if (!GREEDY_REALLOC(out, oalloc, olen + head + (alias ? strlen(alias) : 0) + 2))
                        return -ENOMEM;
                memcpy(out + olen, l, head);
                olen += head;
                if (alias) {
                        memcpy(out + olen, alias, strlen(alias));
                        olen += strlen(alias);
                }
                out[olen++] = '\n';
                l = eol + 1;
        }
        out[olen] = '\0';
        *ret_len = olen;
        *ret = TAKE_PTR(out);
        return 0;
}

const char *unwind_process_module_name(UnwindProcess *p, const char *dwfl_name) {
        for (size_t i = 0; dwfl_name && i < p->n_aliases; i++)
                if (streq(p->aliases[3 * i], dwfl_name))
                        return p->aliases[3 * i + 1];
        return dwfl_name;
}

const char *unwind_process_module_not_read(UnwindProcess *p, const char *dwfl_name) {
        for (size_t i = 0; dwfl_name && i < p->n_aliases; i++)
                if (streq(p->aliases[3 * i], dwfl_name))
                        return p->aliases[3 * i + 2];
        return NULL;
}

/* libdwfl's find_elf for /proc maps, but a file not to be read is not opened: its module has no ELF. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
                    Elf **elfp) {
        if (startswith(name, UNWIND_NOT_READ_PREFIX)) {
                *elfp = NULL;
                return -1;
        }
        return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
}

int unwind_process_new(pid_t pid, const char *debuginfo_path, UnwindProcess **ret) {
        _cleanup_(unwind_process_freep) UnwindProcess *p = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *maps_text = NULL, *dwfl_maps = NULL;
        size_t maps_len = 0, dwfl_maps_len = 0;
        FILE *f;
        int r;

        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->mem_fd = -EBADF;
        p->arch_fd = -EBADF;
        p->pagemap_fd = -EBADF;

        r = proc_open_dir(pid, 0, &dirfd);
        if (r < 0)
                return r;
        r = proc_read_full(dirfd, "maps", MAPS_BYTES_MAX, &maps_text, &maps_len);
        if (r < 0)
                return r;
        p->maps_buf = strdup(maps_text);
        if (!p->maps_buf)
                return -ENOMEM;
        r = proc_parse_maps(p->maps_buf, maps_len, &p->maps, &p->n_maps);
        if (r < 0)
                return r;

        p->mem_fd = openat(dirfd, "mem", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (p->mem_fd < 0)
                log_debug_errno(errno, "Cannot open /proc/%d/mem, reading the stack copy only: %m", (int) pid);

        if (debuginfo_path) {
                p->debuginfo_path = strdup(debuginfo_path);
                if (!p->debuginfo_path)
                        return -ENOMEM;
        }
        p->callbacks = (Dwfl_Callbacks) {
                .find_elf = find_elf,
                .find_debuginfo = dwfl_standard_find_debuginfo,
                .debuginfo_path = p->debuginfo_path ? &p->debuginfo_path : NULL,
        };
        p->dwfl = dwfl_begin(&p->callbacks);
        if (!p->dwfl)
                return -ENOMEM;
        dwfl_report_begin(p->dwfl);
        /* Report from the maps we already read, so the module list and our stack clamps agree. */
        r = maps_alias_paths(p, maps_text, maps_len, &dwfl_maps, &dwfl_maps_len);
        if (r < 0)
                return r;
        f = fmemopen(dwfl_maps, dwfl_maps_len ?: 1, "r");
        if (!f)
                return -ENOMEM;
        r = dwfl_linux_proc_maps_report(p->dwfl, f);
        fclose(f);
        if (r != 0)
                log_debug("dwfl_linux_proc_maps_report(%d) failed: %s", (int) pid, r < 0 ? dwfl_errmsg(-1) : strerror(r));
        /* That variant skips the vDSO (it learns its address from auxv only in dwfl_linux_proc_report()). Report
         * it under libdwfl's own "[vdso: PID]" name, whose find_elf reads the image from memory, no ptrace. */
        for (size_t i = 0; i < p->n_maps; i++)
                if (streq(p->maps[i].path, "[vdso]")) {
                        char name[32];
                        snprintf(name, sizeof name, "[vdso: %d]", (int) pid);
                        r = add_alias(p, name, "[vdso]", NULL);
                        if (r < 0)
                                return r;
                        if (!dwfl_report_module(p->dwfl, name, p->maps[i].start, p->maps[i].end))
                                log_debug("Cannot report the vDSO of %d: %s", (int) pid, dwfl_errmsg(-1));
                        break;
                }
        if (dwfl_report_end(p->dwfl, NULL, NULL) != 0)
                return log_debug_errno(EIO, "dwfl_report_end(%d): %s", (int) pid, dwfl_errmsg(-1));

        *ret = TAKE_PTR(p);
        return 0;
}

/* The backends by kind (the FP one is defined below); NULL where this build has none. */
static const UnwindBackend unwind_backend_fp;
static const UnwindBackend *const unwind_backends[_UNWINDER_MAX] = {
        [UNWINDER_LIBDW] = &unwind_backend_dwfl,
#ifdef HAVE_LIBUNWIND
        [UNWINDER_LIBUNWIND] = &unwind_backend_libunwind,
#endif
        [UNWINDER_FP] = &unwind_backend_fp,
};

UnwindProcess *unwind_process_free(UnwindProcess *p) {
        if (!p)
                return NULL;
        for (UnwinderKind k = 0; k < _UNWINDER_MAX; k++)
                if (unwind_backends[k] && unwind_backends[k]->process_done)
                        unwind_backends[k]->process_done(p);
        for (size_t i = 0; i < p->n_go_tables; i++)
                go_pclntab_free(p->go_tables[i].table);
        if (p->dwfl)
                dwfl_end(p->dwfl);
        if (p->arch_elf)
                elf_end(p->arch_elf);
        safe_close(p->arch_fd);
        safe_close(p->mem_fd);
        for (size_t i = 0; i < 3 * p->n_aliases; i++)
                free(p->aliases[i]);
        free(p->aliases);
        for (size_t i = 0; p->fuse_why && i < p->n_fuse_mounts; i++)
                free(p->fuse_why[i]);
        free(p->fuse_why);
        free(p->fuse_answering);
        for (size_t i = 0; i < p->n_fuse_copies; i++)
                safe_close(p->fuse_copies[i]);
        free(p->fuse_copies);
        free(p->fuse_mounts);
        free(p->unread);
        safe_close(p->pagemap_fd);
        free(p->maps);
        free(p->maps_buf);
        free(p->debuginfo_path);
        free(p);
        return NULL;
}

Dwfl *unwind_process_dwfl(UnwindProcess *p) {
        return p->dwfl;
}

const ProcMap *unwind_process_maps(UnwindProcess *p, size_t *ret_n) {
        /* No address space (a zombie, or one we could not read): no maps, so no stack to copy. */
        *ret_n = p ? p->n_maps : 0;
        return p ? p->maps : NULL;
}


pid_t unwind_process_pid(UnwindProcess *p) {
        return p->pid;
}

/* Whether every page of [ADDR, ADDR + LEN) is in memory (bit 63 of its pagemap entry). */
static bool mem_resident(UnwindProcess *p, uint64_t addr, size_t len) {
        uint64_t first = addr / 4096, last = (addr + len - 1) / 4096, e;

        if (p->pagemap_fd < 0) {
                char path[32];

                snprintf(path, sizeof path, "/proc/%d/pagemap", (int) p->pid);
                p->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (p->pagemap_fd < 0)
                        return false;
        }
        for (uint64_t pg = first; pg <= last; pg++)
                if (pg > (uint64_t) INT64_MAX / sizeof e ||
                    pread(p->pagemap_fd, &e, sizeof e, (off_t) (pg * sizeof e)) != (ssize_t) sizeof e || !(e >> 63))
                        return false;
        return true;
}

/* Read target memory. In a file not read (see fuse_not_answering()), only what is in memory: a page that is not
 * would be faulted in from that file, through its daemon. */
static int mem_read(UnwindProcess *p, uint64_t addr, void *buf, size_t len) {
        if (p->mem_fd < 0 || len == 0 || addr > (uint64_t) INT64_MAX - len)
                return -EIO;
        for (size_t i = 0; i < p->n_unread; i++)
                if (addr < p->unread[i][1] && addr + len > p->unread[i][0] && !mem_resident(p, addr, len))
                        return -EIO;
        return pread(p->mem_fd, buf, len, (off_t) addr) == (ssize_t) len ? 0 : -EIO;
}

bool unwind_process_read_word(UnwindProcess *p, uint64_t addr, uint64_t *ret) {
        const UnwindStack *s = p->stack;

        if (s && addr >= s->base && addr - s->base <= s->len && s->len - (addr - s->base) >= sizeof *ret) {
                memcpy(ret, s->data + (addr - s->base), sizeof *ret);
                return true;
        }
        return mem_read(p, addr, ret, sizeof *ret) == 0;
}

/* Notes larger than this are not a build-id note's segment. */
#define BUILD_ID_NOTES_MAX 4096
#define BUILD_ID_PHDRS_MAX 64

int unwind_process_build_id(UnwindProcess *p, uint64_t start, char **ret) {
        Elf64_Phdr ph[BUILD_ID_PHDRS_MAX];
        uint8_t notes[BUILD_ID_NOTES_MAX];
        uint64_t base = UINT64_MAX;
        Elf64_Ehdr eh;
        size_t n;

        /* 64-bit native images only: what this build unwinds. */
        if (mem_read(p, start, &eh, sizeof eh) < 0)
                return -EIO;
        if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
            eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0)
                return -ENOENT;
        n = MIN((size_t) eh.e_phnum, ELEMENTSOF(ph));
        if (eh.e_phoff > UINT64_MAX - start || mem_read(p, start + eh.e_phoff, ph, n * sizeof *ph) < 0)
                return -EIO;
        /* The header is mapped at the first PT_LOAD's page: the load bias is START less that page's address. */
        for (size_t i = 0; i < n; i++)
                if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
                        base = start - (ph[i].p_vaddr & ~(uint64_t) 4095);
        if (base == UINT64_MAX)
                return -ENOENT;
        for (size_t i = 0; i < n; i++) {
                size_t len = MIN(ph[i].p_filesz, sizeof notes), off = 0;

                if (ph[i].p_type != PT_NOTE || ph[i].p_vaddr > UINT64_MAX - base ||
                    mem_read(p, base + ph[i].p_vaddr, notes, len) < 0)
                        continue;
                while (off + sizeof(Elf64_Nhdr) <= len) {
                        Elf64_Nhdr nh;
                        size_t name_at = off + sizeof nh, desc_at, next;

                        memcpy(&nh, notes + off, sizeof nh);
                        desc_at = name_at + ((nh.n_namesz + 3U) & ~3U);
                        next = desc_at + ((nh.n_descsz + 3U) & ~3U);
                        if (nh.n_namesz > len || nh.n_descsz > len || next > len)
                                break;
                        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(notes + name_at, "GNU", 4) == 0 &&
                            nh.n_descsz > 0 && nh.n_descsz <= 64) {
                                char *hex = malloc(nh.n_descsz * 2 + 1);
                                if (!hex)
                                        return -ENOMEM;
                                for (size_t k = 0; k < nh.n_descsz; k++)
                                        snprintf(hex + 2 * k, 3, "%02x", notes[desc_at + k]);
                                *ret = hex;
                                return 0;
                        }
                        off = next;
                }
        }
        return -ENOENT;
}

bool unwind_process_is_text(UnwindProcess *p, uint64_t addr) {
        const ProcMap *m = proc_maps_find(p->maps, p->n_maps, addr);
        return m && m->x;
}

static bool in_stack(const UnwindStack *s, uint64_t addr) {
        return s && addr >= s->base && addr < s->base + s->len;
}

/* Frame-pointer walk from FP (rbp, x29): a frame record is {the caller's FP, the return address} on both
 * architectures. Only trusted while FP stays inside the stack copy and moves strictly outwards. On aarch64 a leaf
 * function (or one that has not stored its record yet) keeps its return address in the link register only: LR,
 * when known (0 when not, or for a frame other than the initial one), comes first unless the record at FP already
 * holds it. Return addresses lose their pointer authentication bits (PAC_MASK) before they are looked at. */
static void unwind_fp(UnwindProcess *p, uint64_t fp, uint64_t lr, uint64_t pac_mask, UnwindFrame *frames,
                      size_t max, size_t *n, UnwindResult *res) {
        const UnwindStack *s = p->stack;

        if (lr != 0) {
                uint64_t saved = 0;

                lr = arch_code_address(pac_mask, lr);
                if (in_stack(s, fp) && unwind_process_read_word(p, fp + 8, &saved))
                        saved = arch_code_address(pac_mask, saved);
                if (saved != lr && unwind_process_is_text(p, lr)) {
                        if (*n >= max) {
                                res->truncated = true;
                                snprintf(res->end, sizeof res->end, "max frames");
                                return;
                        }
                        frames[(*n)++] = (UnwindFrame) { .pc = lr, .fp = fp, .method = FRAME_METHOD_FP };
                }
        }
        for (unsigned k = 0; k < FP_FRAMES_MAX; k++) {
                uint64_t next, ret;

                if (*n >= max) {
                        res->truncated = true;
                        snprintf(res->end, sizeof res->end, "max frames");
                        return;
                }
                if (!in_stack(s, fp) || !unwind_process_read_word(p, fp, &next) ||
                    !unwind_process_read_word(p, fp + 8, &ret))
                        return;
                ret = arch_code_address(pac_mask, ret);
                if (ret == 0 || !unwind_process_is_text(p, ret))
                        return;
                /* The caller's frame pointer is the one its record held. */
                frames[(*n)++] = (UnwindFrame) { .pc = ret, .fp = next, .method = FRAME_METHOD_FP };
                if (next == 0) {
                        res->clean = true;
                        snprintf(res->end, sizeof res->end, "end of frame-pointer chain");
                        return;
                }
                if (next <= fp)
                        return;
                fp = next;
        }
}

/* The Go function table of the module at PC, and its bias; NULL when it has none we read. */
static const GoPclntab *go_table_at(UnwindProcess *p, uint64_t pc, uint64_t *ret_bias) {
        Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, pc);
        GElf_Addr bias;
        Elf *elf;

        if (!mod)
                return NULL;
        for (size_t i = 0; i < p->n_go_tables; i++)
                if (p->go_tables[i].mod == mod) {
                        *ret_bias = p->go_tables[i].bias;
                        return p->go_tables[i].table;
                }
        if (p->n_go_tables >= UNWIND_GO_TABLES_MAX)
                return NULL;
        p->go_tables[p->n_go_tables] = (typeof(p->go_tables[0])) { .mod = mod };
        elf = dwfl_module_getelf(mod, &bias);
        if (elf && go_pclntab_open(elf, &p->go_tables[p->n_go_tables].table) >= 0)
                p->go_tables[p->n_go_tables].bias = bias;
        *ret_bias = p->go_tables[p->n_go_tables].bias;
        return p->go_tables[p->n_go_tables++].table;
}

/* Go code without CFI (a binary built with -ldflags=-w; Go's assembly): each function's frame size at a pc from the
 * binary's own table (pclntab's pcsp), as the runtime's traceback unwinds, from the last frame's PC and SP. x86-64:
 * the call pushed the return address just above the frame. aarch64: the prologue stored the link register at the
 * frame's bottom (0(SP)); a function without a frame still has it in LR, known (non-zero) for the initial frame
 * only. Needs no frame pointer, which a passive capture does not have. Ends clean at a function the table marks as
 * a stack's top (runtime.goexit, mstart, …). */
static void unwind_go(UnwindProcess *p, uint64_t pc, uint64_t sp, uint64_t lr, UnwindFrame *frames, size_t max,
                      size_t *n, UnwindResult *res) {
        for (unsigned k = 0; k < FP_FRAMES_MAX; k++) {
                const GoPclntab *t;
                uint64_t bias = 0, ret;
                int32_t delta;
                bool top;

                if (!(t = go_table_at(p, pc, &bias)) || go_pclntab_spdelta(t, pc - bias, &delta, &top) < 0)
                        return;
                if (top) {
                        res->clean = true;
                        snprintf(res->end, sizeof res->end, "the outermost frame of a Go stack");
                        return;
                }
                if (*n >= max) {
                        res->truncated = true;
                        snprintf(res->end, sizeof res->end, "max frames");
                        return;
                }
#if defined(__x86_64__)
                if (!in_stack(p->stack, sp + (uint64_t) delta) ||
                    !unwind_process_read_word(p, sp + (uint64_t) delta, &ret))
                        return;
                sp += (uint64_t) delta + 8;
#elif defined(__aarch64__)
                if (delta < 0)
                        return;
                if (delta == 0) {
                        if (k > 0 || lr == 0)
                                return;
                        ret = lr;
                } else if (!in_stack(p->stack, sp) || !unwind_process_read_word(p, sp, &ret))
                        return;
                sp += (uint64_t) delta;
#endif
                if (ret == 0 || !unwind_process_is_text(p, ret))
                        return;
                frames[(*n)++] = (UnwindFrame) { .pc = ret, .method = FRAME_METHOD_PCLNTAB };
                pc = ret;
        }
}

/* Is RET the address just after a call instruction? */
static bool after_call(UnwindProcess *p, uint64_t ret) {
        uint64_t w;
        uint8_t b[8];

        if (ret < 8 || !unwind_process_read_word(p, ret - 8, &w))
                return false;
        memcpy(b, &w, sizeof b);
        return arch_after_call(b);
}

/* Last resort: scan the stack copy upwards from SP for words that return into text right after a call. Such
 * frames are guesses and marked as such. */
static void unwind_scan(UnwindProcess *p, uint64_t sp, uint64_t pac_mask, UnwindFrame *frames, size_t max,
                        size_t *n, UnwindResult *res) {
        const UnwindStack *s = p->stack;
        unsigned found = 0;

        if (!s || sp < s->base)
                return;
        for (uint64_t a = sp & ~7ULL; a + 8 <= s->base + s->len && a - sp < SCAN_BYTES_MAX; a += 8) {
                uint64_t v;

                if (found >= SCAN_FRAMES_MAX)
                        break;
                if (*n >= max) {
                        res->truncated = true;
                        snprintf(res->end, sizeof res->end, "max frames");
                        return;
                }
                memcpy(&v, s->data + (a - s->base), sizeof v);
                v = arch_code_address(pac_mask, v);
                if (!unwind_process_is_text(p, v) || !after_call(p, v))
                        continue;
                frames[(*n)++] = (UnwindFrame) { .pc = v, .method = FRAME_METHOD_SCAN };
                found++;
        }
}

Dwarf_Frame *unwind_cfi_frame_at(UnwindProcess *p, uint64_t pc, Dwarf_Addr *ret_bias) {
        Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, pc);
        Dwarf_Frame *frame = NULL;
        Dwarf_Addr bias;
        Dwarf_CFI *cfi;

        if (!mod)
                return NULL;
        cfi = dwfl_module_eh_cfi(mod, &bias);
        if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0) {
                cfi = dwfl_module_dwarf_cfi(mod, &bias);
                if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0)
                        return NULL;
        }
        *ret_bias = bias;
        return frame;
}

#if defined(__aarch64__)
/* Bounds of the leaf-caller search: how far above SP the caller's saved link register may be, and how much of the
 * caller's code is read to find its call. */
#define LEAF_CALLER_STACK_MAX 1024
#define LEAF_CALLER_CODE_MAX (64U * 1024)

/* Is FRAME's CFA "sp + offset"? The offset in *RET. */
static bool cfa_from_sp(Dwarf_Frame *frame, uint64_t *ret) {
        Dwarf_Op *ops;
        size_t nops;

        if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1)
                return false;
        if (ops[0].atom == DW_OP_bregx && ops[0].number == UNWIND_REG_SP)
                *ret = ops[0].number2;
        else if (ops[0].atom == DW_OP_breg31)
                *ret = ops[0].number;
        else
                return false;
        return true;
}

/* Where FRAME saved the link register: 1 and the offset from the CFA in *RET when at "CFA + offset", 0 when it keeps
 * the same value (a leaf that never stored it), -1 for anything else. */
static int lr_rule(Dwarf_Frame *frame, uint64_t *ret) {
        Dwarf_Op ops_mem[3], *ops = NULL;
        size_t nops = 0;

        if (dwarf_frame_register(frame, UNWIND_REG_LR, ops_mem, &ops, &nops) != 0)
                return -1;
        if (nops == 0)
                return ops == NULL ? 0 : -1;
        if (ops[0].atom != DW_OP_call_frame_cfa || nops > 2 || (nops == 2 && ops[1].atom != DW_OP_plus_uconst))
                return -1;
        *ret = nops == 2 ? ops[1].number : 0;
        return 1;
}

/* The function around ADDR, by the module's symbol table: its entry in *RET_START, its end in *RET_END. (A CFI
 * frame's range is only that of its row.) */
static bool function_at(UnwindProcess *p, uint64_t addr, uint64_t *ret_start, uint64_t *ret_end) {
        Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, addr);
        GElf_Off off = 0;
        GElf_Sym sym;
        GElf_Word shndx;
        Elf *elf;
        Dwarf_Addr bias;

        if (!mod || !dwfl_module_addrinfo(mod, addr, &off, &sym, &shndx, &elf, &bias) ||
            GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 || off >= sym.st_size)
                return false;
        *ret_start = addr - off;
        *ret_end = *ret_start + sym.st_size;
        return true;
}

static bool read_insn(UnwindProcess *p, uint64_t addr, uint32_t *ret) {
        return mem_read(p, addr, ret, sizeof *ret) == 0;
}

/* The target of a BL (direct call) at ADDR, or 0. */
static uint64_t bl_target(uint32_t insn, uint64_t addr) {
        if ((insn & 0xfc000000U) != 0x94000000U)
                return 0;
        return addr + (uint64_t) ((int64_t) ((int32_t) (insn << 6) >> 6) * 4);
}

/* Where the PLT stub at ADDR jumps: "adrp x16, page; ldr x17, [x16, #off]; add x16, x16, #off; br x17" (after a
 * "bti c" where branch protection is on) loads its target from a GOT slot, which the dynamic linker filled. 0 when
 * ADDR is no such stub or the slot cannot be read. */
static uint64_t plt_target(UnwindProcess *p, uint64_t addr) {
        uint32_t adrp, ldr;
        uint64_t page, slot, target;
        int64_t imm;

        if (!read_insn(p, addr, &adrp))
                return 0;
        if (adrp == 0xd503245fU) { /* bti c */
                addr += 4;
                if (!read_insn(p, addr, &adrp))
                        return 0;
        }
        if ((adrp & 0x9f00001fU) != 0x90000010U || !read_insn(p, addr + 4, &ldr) ||
            (ldr & 0xffc003ffU) != 0xf9400211U)
                return 0;
        imm = (int64_t) ((((adrp >> 5) & 0x7ffffU) << 2) | ((adrp >> 29) & 3U));
        imm = (imm << 43) >> 43; /* 21 bits, signed */
        page = (addr & ~(uint64_t) 0xfff) + (uint64_t) (imm * 4096);
        slot = page + ((ldr >> 10) & 0xfffU) * 8;
        if (!unwind_process_read_word(p, slot, &target))
                return 0;
        return target;
}

/* How many calls the function at [START, END) makes to ENTRY, directly or through a PLT stub; the last one's address
 * in *RET. */
static unsigned calls_to(UnwindProcess *p, uint64_t start, uint64_t end, uint64_t entry, uint64_t *ret) {
        _cleanup_free_ uint32_t *code = NULL;
        size_t len = (size_t) (end - start);
        unsigned found = 0;

        if (end <= start || len > LEAF_CALLER_CODE_MAX || (len & 3) != 0 || !(code = malloc(len)) ||
            mem_read(p, start, code, len) < 0)
                return 0;
        for (size_t i = 0; i < len / 4; i++) {
                uint64_t at = start + 4 * i, t = bl_target(code[i], at);

                if (t != 0 && (t == entry || plt_target(p, t) == entry)) {
                        *ret = at;
                        found++;
                }
        }
        return found;
}

/* Frame #0 is a leaf (a libc system call wrapper: __vfork, read, …) whose CFI keeps the return address in the link
 * register, and a passive capture has no link register (/proc/PID/syscall gives SP and PC only; ptrace cannot stop a
 * D-state thread to read it). Its caller can still be proven, without guessing:
 *  - the leaf's CFA is SP + k, so the caller's SP is that CFA;
 *  - the caller saved its own link register in its frame above that SP: a word there that returns right after a
 *    direct call (BL) names the caller's entry point, the callee of that BL;
 *  - the caller makes exactly one call to the leaf's function (directly or through its PLT stub): the return address
 *    is the instruction after it;
 *  - the caller's CFI at that call puts its saved link register at exactly the word the search started from.
 * Then *RET_PC and *RET_SP are the caller's PC and SP, from which CFI goes on. -ENOENT when anything does not hold:
 * the caller is then unknown, and nothing is made up for it. */
static int leaf_caller(UnwindProcess *p, const UnwindRegs *regs, uint64_t *ret_pc, uint64_t *ret_sp) {
        uint64_t pc = regs->r[UNWIND_REG_PC], sp, entry, end, off, lr_off;
        Dwarf_Frame *frame;
        Dwarf_Addr bias;
        bool leaf;

        frame = unwind_cfi_frame_at(p, pc, &bias);
        if (!frame)
                return -ENOENT;
        leaf = cfa_from_sp(frame, &off) && lr_rule(frame, &lr_off) == 0;
        free(frame);
        if (!leaf || !function_at(p, pc, &entry, &end))
                return -ENOENT;
        sp = regs->r[UNWIND_REG_SP] + off;

        for (uint64_t a = sp; a - sp < LEAF_CALLER_STACK_MAX && in_stack(p->stack, a) &&
                              in_stack(p->stack, a + 7); a += 8) {
                uint64_t w, callee, cstart, cend, site = 0, cfa_off;
                Dwarf_Addr cbias;
                uint32_t insn;
                bool ok;

                if (!unwind_process_read_word(p, a, &w))
                        break;
                w = arch_code_address(regs->pac_mask, w);
                if (w < 4 || !unwind_process_is_text(p, w) || !read_insn(p, w - 4, &insn) ||
                    (callee = bl_target(insn, w - 4)) == 0)
                        continue;
                if (!function_at(p, callee, &cstart, &cend) || cstart != callee ||
                    calls_to(p, callee, cend, entry, &site) != 1)
                        continue;
                /* The caller's CFI at its call: where it keeps the link register must be where we found it. */
                frame = unwind_cfi_frame_at(p, site, &cbias);
                if (!frame)
                        continue;
                ok = cfa_from_sp(frame, &cfa_off) && lr_rule(frame, &lr_off) == 1 && sp + cfa_off + lr_off == a;
                free(frame);
                if (!ok)
                        continue;
                *ret_pc = site + 4;
                *ret_sp = sp;
                return 0;
        }
        return -ENOENT;
}

/* Frame #0 is in a module without any CFI (aarch64's vDSO: the kernel drops its .eh_frame; its functions are leaves
 * that keep the return address in the link register, signed), and the capture has the link register (ptrace). The
 * caller is the link register when it returns, right after a call, into another module: a leaf's caller. libdw's own
 * guess for a frame without CFI (the frame-pointer record, SP moved past it) loses the caller's caller. */
static int cfi_less_leaf_caller(UnwindProcess *p, const UnwindRegs *regs, uint64_t *ret_pc) {
        uint64_t pc = regs->r[UNWIND_REG_PC], lr;
        Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, pc);
        Dwarf_Addr bias;

        if (!mod || !unwind_regs_has(regs, UNWIND_REG_LR) || dwfl_module_eh_cfi(mod, &bias))
                return -ENOENT;
        lr = arch_code_address(regs->pac_mask, regs->r[UNWIND_REG_LR]);
        if (dwfl_addrmodule(p->dwfl, lr) == mod || !unwind_process_is_text(p, lr) || !after_call(p, lr))
                return -ENOENT;
        *ret_pc = lr;
        return 0;
}

/* Unwind on from a leaf's caller at CALLER_PC, CALLER_SP with the backend KIND, after frame #0 (the leaf): the leaf
 * changed no callee-saved register, so what REGS knows of them holds. */
static void unwind_from_caller(UnwindProcess *p, UnwinderKind kind, pid_t tid, const UnwindRegs *regs,
                               uint64_t caller_pc, uint64_t caller_sp, UnwindFrame *frames, size_t max, size_t *n,
                               UnwindRegs *last, UnwindResult *res) {
        UnwindRegs from = { .pac_mask = regs->pac_mask };
        UnwindResult res2 = {};

        for (unsigned k = 19; k <= UNWIND_REG_FP; k++)
                if (unwind_regs_has(regs, k))
                        unwind_regs_set(&from, k, regs->r[k]);
        unwind_regs_set(&from, UNWIND_REG_PC, caller_pc);
        unwind_regs_set(&from, UNWIND_REG_SP, caller_sp);
        *n = 1;
        *last = from;
        if (unwind_backends[kind]->unwind_thread(p, tid, &from, frames, max, n, last, &res2) < 0 || *n == 1) {
                frames[(*n)++] = (UnwindFrame) { .pc = caller_pc };
                *last = from;
                snprintf(res2.end, sizeof res2.end, "no unwinding from the leaf's caller");
        }
        /* A return address, not an interrupted instruction; what libdw reports for a CFI leaf's caller too. */
        frames[1].activation = false;
        frames[1].method = FRAME_METHOD_CFI;
        *res = res2;
}
#endif

/* The frame-pointer "backend": just the initial frame; the fallbacks below walk the chain from it. */
static int fp_unwind_thread(UnwindProcess *p, pid_t tid, const UnwindRegs *regs, UnwindFrame *frames, size_t max,
                            size_t *n, UnwindRegs *last, UnwindResult *res) {
        frames[(*n)++] = (UnwindFrame) { .pc = regs->r[UNWIND_REG_PC], .activation = true,
                                         .fp = unwind_regs_has(regs, UNWIND_REG_FP) ? regs->r[UNWIND_REG_FP] : 0,
                                         .method = FRAME_METHOD_INITIAL };
        snprintf(res->end, sizeof res->end, "no frame pointer");
        return 0;
}

static const UnwindBackend unwind_backend_fp = {
        .unwind_thread = fp_unwind_thread,
};

int unwind_thread(UnwindProcess *p, UnwinderKind kind, pid_t tid, const UnwindRegs *regs, const UnwindStack *stack,
                  UnwindFrame *frames, size_t max, UnwindResult *ret) {
        UnwindResult res = {};
        UnwindRegs last = *regs;
        size_t n = 0;
        int r = 0;

        if (!unwind_regs_has(regs, UNWIND_REG_PC) || max == 0)
                return -EINVAL;
        p->stack = stack;

        if (kind < 0 || kind >= _UNWINDER_MAX)
                r = -EINVAL;
        else if (!unwind_backends[kind])
                r = -EOPNOTSUPP; /* not built (libunwind is optional) */
        else
                r = unwind_backends[kind]->unwind_thread(p, tid, regs, frames, max, &n, &last, &res);
        if (r < 0) {
                p->stack = NULL;
                return r;
        }

#if defined(__aarch64__)
        /* A leaf at frame #0 whose return address is only in the link register: without the link register (a passive
         * capture), its caller where it can be proven (leaf_caller()); with it, in a module without CFI (the vDSO),
         * the link register. CFI from there on. */
        if (!res.truncated && n >= 1 && max > 1 && frames[0].method == FRAME_METHOD_INITIAL) {
                uint64_t caller_pc, caller_sp = regs->r[UNWIND_REG_SP];

                if (!res.clean && n == 1 && !unwind_regs_has(regs, UNWIND_REG_LR) &&
                    leaf_caller(p, regs, &caller_pc, &caller_sp) >= 0)
                        unwind_from_caller(p, kind, tid, regs, caller_pc, caller_sp, frames, max, &n, &last, &res);
                /* Even where the backend ended "clean": its end came from its own guess for the frame without
                 * CFI (libunwind's stops at the leaf's caller), not from CFI. */
                else if (cfi_less_leaf_caller(p, regs, &caller_pc) >= 0)
                        unwind_from_caller(p, kind, tid, regs, caller_pc, caller_sp, frames, max, &n, &last, &res);
        }
#endif

        /* Where the backend could not go on, try the frame-pointer chain, then a marked scan. */
        if (!res.clean && !res.truncated && n < max) {
                size_t before = n;

                /* The link register is the caller only while still in the initial frame (aarch64; 0 on x86-64). */
                uint64_t lr = 0;
#if defined(__aarch64__)
                if (n == 1 && frames[0].method == FRAME_METHOD_INITIAL && unwind_regs_has(regs, UNWIND_REG_LR))
                        lr = regs->r[UNWIND_REG_LR];
#endif

                if (n > 0 && unwind_regs_has(&last, UNWIND_REG_SP))
                        unwind_go(p, frames[n - 1].pc, last.r[UNWIND_REG_SP], lr, frames, max, &n, &res);
                if (n == before && unwind_regs_has(&last, UNWIND_REG_FP))
                        unwind_fp(p, last.r[UNWIND_REG_FP], lr, regs->pac_mask, frames, max, &n, &res);
                if (!res.clean && !res.truncated && n == before && unwind_regs_has(&last, UNWIND_REG_SP))
                        unwind_scan(p, last.r[UNWIND_REG_SP], regs->pac_mask, frames, max, &n, &res);
                if (n > before && !res.clean && !res.truncated) {
                        size_t l = strlen(res.end);
                        snprintf(res.end + l, sizeof res.end - l, "%s%s", l ? "; then " : "",
                                 frames[n - 1].method == FRAME_METHOD_SCAN      ? "stack scan"
                                 : frames[n - 1].method == FRAME_METHOD_PCLNTAB ? "Go's function table"
                                                                                : "frame pointers");
                }
        }
        if (n >= max && !res.clean) {
                res.truncated = true;
                snprintf(res.end, sizeof res.end, "max frames (%zu)", max);
        }
        p->stack = NULL;
        res.n_frames = n;
        *ret = res;
        return 0;
}
