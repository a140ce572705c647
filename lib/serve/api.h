/* api.h: the HTTP contract between stackwatchd and stackctl: routes, query parameters, JSON keys, limits. */
#pragma once

/* Version history:
 *   1  /stacks/<pid>, /processes, /snapshots[/<id>], /rules, /metrics, /healthz.
 * A change that removes or renames a key bumps API_VERSION; adding a key does not. */
#define API_VERSION 1

#define API_SOCKET_DEFAULT "/run/stackwatch/stackwatch.sock"
#define API_SOCKET_MODE_DEFAULT 0660
/* "PORT" alone listens on loopback: this is the port the docs and examples use. */
#define API_TCP_PORT_EXAMPLE 9177

/* Routes (all GET; anything else is 405, an unknown path 404). */
#define API_ROUTE_STACKS "/stacks/"             /* + pid: capture now, budgeted like a rule firing */
#define API_ROUTE_PROCESSES "/processes"        /* the current classification */
#define API_ROUTE_SNAPSHOTS "/snapshots"        /* the archive; + "/" + id for one */
#define API_ROUTE_PROBLEMS "/problems"          /* every signature's firings, counted (store/problems.h) */
#define API_ROUTE_RULES "/rules"                /* loaded rules, how often each fired */
#define API_ROUTE_METRICS "/metrics"            /* Prometheus text format 0.0.4 */
#define API_ROUTE_HEALTHZ "/healthz"            /* 200 while scans keep coming, 503 when they stall */

/* Query parameters. */
#define API_Q_FORMAT "format"                   /* json (default) | text | folded | svg | pprof (stacks, snapshots/<id>) */
#define API_Q_PICTURE "picture"                 /* format=svg: all (default) | flame | chain (stacks, snapshots/<id>) */
#define API_Q_TID "tid"                         /* stacks: only this thread */
#define API_Q_RESYMBOLIZE "resymbolize"         /* snapshots/<id>: 1 = frames resolved again with today's debuginfo */
#define API_Q_PEERS "peers"                     /* stacks: wait-chain depth, 0..8 (default 0: no chain) */
#define API_Q_ALL "all"                         /* processes: 1 = every thread, not only the unhealthy */
#define API_Q_CLASS "class"                     /* processes: comma-separated class names */
#define API_Q_UNIT "unit"                       /* processes: systemd unit glob */
#define API_Q_COMM "comm"                       /* processes: comm glob */
#define API_Q_PID "pid"                         /* snapshots */
#define API_Q_RULE "rule"                       /* snapshots */
#define API_Q_SINCE "since"                     /* snapshots: CLOCK_REALTIME µs since the epoch */
#define API_Q_LIMIT "limit"                     /* snapshots, problems: the newest N */
#define API_Q_SIGNATURE "signature"             /* snapshots, problems: of this problem only */

/* ?format= takes the names of render/render.h's one table (render_format_to_string(): json, text, folded, svg,
 * pprof), which stackctl's flags name too; ?picture= those of svg_picture_to_string(). */

#define API_CONTENT_JSON "application/json"
#define API_CONTENT_TEXT "text/plain; charset=utf-8"
#define API_CONTENT_SVG "image/svg+xml"
#define API_CONTENT_PPROF "application/octet-stream" /* a gzipped profile.proto, as Go's net/http/pprof serves it */
#define API_CONTENT_METRICS "text/plain; version=0.0.4; charset=utf-8"

/* Every error: {"error": "<what was wrong with the request>", "status": <code>}. */
#define API_K_ERROR "error"
#define API_K_STATUS "status"

/* GET /processes → {"scan": {…}, "threads": [{…}, …]}, threads sorted by pid, tid. */
#define API_K_SCAN "scan"
#define API_K_SCANS "scans"
#define API_K_LAST_SCAN_AGE_MS "last_scan_age_ms"
#define API_K_LAST_SCAN_DURATION_US "last_scan_duration_us"
#define API_K_POLL_INTERVAL_MS "poll_interval_ms"   /* the interval in force (auto: stretched by the scan's cost) */
#define API_K_LAST_SCAN_CPU_US "last_scan_cpu_us"
#define API_K_LAST_POLL_CPU_US "last_poll_cpu_us"
#define API_K_SOURCE "source"                       /* scan: "bpf" or "proc" */
#define API_K_SOURCE_WHY "source_why"
#define API_K_THREADS "threads"
#define API_K_PROCESSES "processes"
#define API_K_PID "pid"
#define API_K_TID "tid"
#define API_K_COMM "comm"                       /* the thread's */
#define API_K_PROCESS_COMM "process_comm"       /* the process's (its leader's) */
#define API_K_STATE "state"                     /* /proc state letter */
#define API_K_CLASS "class"
#define API_K_FOR_MS "for_ms"                   /* how long the class has held */
#define API_K_CPU_PERCENT "cpu_percent"
#define API_K_SYSCALLS_PER_SEC "syscalls_per_sec"
#define API_K_BYTES_PER_SEC "bytes_per_sec"
#define API_K_SYSCALL "syscall"                 /* name of the syscall the thread is parked in, when known */
#define API_K_BLOCKED_BECAUSE "blocked_because" /* a sleeping blocked thread: what owes its wait ("a deadlock: …") */
#define API_K_WCHAN "wchan"
#define API_K_UNIT "unit"                       /* when known (read when a rule or a filter needed it) */
#define API_K_FROZEN_BY "frozen_by"             /* {"cgroup", "version"}: the cgroup freezer holding its process */
#define API_K_CGROUP "cgroup"
#define API_K_VERSION "version"
#define API_K_PYTHON_FRAME "python_frame"       /* the innermost Python frame ("inner (app.py:12)") the daemon's
                                                 * latest capture of the thread caught (a rule's snapshot, or a
                                                 * GET /stacks of its process); absent when none did */

/* GET /snapshots → {"snapshots": [{id, timestamp_usec, pid, comm, exe, unit, rule, class, size, file_size}…],
 * "skipped": N},
 * oldest first (the same objects as `stackctl list --json`). /snapshots/<id> → the stackwatch.snapshot/1 document. */
#define API_K_SNAPSHOTS "snapshots"
#define API_K_PROBLEMS "problems"
#define API_K_SKIPPED "skipped"
#define API_K_ID "id"
#define API_K_TIMESTAMP_USEC "timestamp_usec"
#define API_K_RULE "rule"
#define API_K_SIZE "size"
#define API_K_FILE_SIZE "file_size"

/* GET /rules → {"rules": [{name, file, line, classes, for_ms, states, actions, severity, cooldown_ms, peers, fired,
 * last_fired_usec}…], "budget": {"max_per_minute", "used"}}. last_fired_usec is CLOCK_REALTIME µs, 0 = never. */
#define API_K_RULES "rules"
#define API_K_NAME "name"
#define API_K_FILE "file"
#define API_K_LINE "line"
#define API_K_CLASSES "classes"
#define API_K_STATES "states"
#define API_K_ACTIONS "actions"
#define API_K_COOLDOWN_MS "cooldown_ms"
/* GET /healthz → {..., "config": {"file", "reload": "ok"|"failed", "error" (the failed reload's first error, else
 * null), "loaded_usec" (CLOCK_REALTIME of the load in force), "reload_failures"}}. */
#define API_K_CONFIG "config"
#define API_K_RELOAD "reload"
#define API_K_LOADED_USEC "loaded_usec"
#define API_K_RELOAD_FAILURES "reload_failures"
#define API_RELOAD_OK "ok"
#define API_RELOAD_FAILED "failed"
#define API_K_SEVERITY "severity"
#define API_K_PEERS "peers"
#define API_K_DEADLOCK "deadlock"
#define API_K_LOCK_HOLDER "lock_holder"
#define API_K_LOCK "lock"
#define API_K_OBJECT "object"
#define API_K_OWNER "owner"
#define API_K_FIRED "fired"
#define API_K_LAST_FIRED_USEC "last_fired_usec"
#define API_K_BUDGET "budget"
#define API_K_MAX_PER_MINUTE "max_per_minute"
#define API_K_USED "used"

/* GET /healthz → {"status": "ok"|"stalled", "version", "api", "pid", "uptime_sec", "scan": {…as above, plus
 * "by_class": {class: n}}, "snapshots_written", "capture_failures", "captures_running",
 * "archive": {"directory", "snapshots", "bytes"}}. */
#define API_K_VERSION "version"
#define API_K_API "api"
#define API_K_UPTIME_SEC "uptime_sec"
#define API_K_BY_CLASS "by_class"
#define API_K_SNAPSHOTS_WRITTEN "snapshots_written"
#define API_K_CAPTURE_FAILURES "capture_failures"
#define API_K_CAPTURES_RUNNING "captures_running"
#define API_K_ARCHIVE "archive"
#define API_K_DIRECTORY "directory"
#define API_K_BYTES "bytes"
#define API_STATUS_OK "ok"
#define API_STATUS_STALLED "stalled"
/* /healthz says "stalled" (503) when the last scan is older than this many poll intervals. */
#define API_STALLED_POLLS 3

/* Limits a request cannot exceed (the server answers 414/400; the client checks them too). */
#define API_URL_MAX 2048
#define API_TOKEN_MAX 256
