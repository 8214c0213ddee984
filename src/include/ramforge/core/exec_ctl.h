/*
 * The words of exec's control channel (docs/EXEC.md, "The control
 * channel"): a unix stream socket a process under ramforge exec listens on,
 * RUNTIME/exec-PID.sock (mode 0600 in a 0700 directory), one request per
 * connection, one line each way, served one at a time:
 *
 *   status                          -> a "model ..." line per managed model, then "end"
 *   release MAJ:MIN INODE BYTES     -> "queued ID", "busy ID" (a request of that model
 *                                      still waits) or "error REASON"
 *
 * A release is taken at the model's next idle moment (no submission in
 * flight and none for the quiet time) under the model's gate; its outcome
 * is in the next status. Only the text is here (plain C, tested without a
 * socket); the engine serves it (src/preload/engine_control.c), watch asks
 * it (src/sys/exec_ctl_client.c).
 */
#ifndef RAMFORGE_CORE_EXEC_CTL_H
#define RAMFORGE_CORE_EXEC_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_EXEC_CTL_LINE_MAX 4608 /* bytes of one line: a path of 4096 and the figures */

enum rf_exec_ctl_state {
    RF_EXEC_CTL_NONE = 0, /* no request yet */
    RF_EXEC_CTL_WAITING,  /* queued: waits for the model's idle moment */
    RF_EXEC_CTL_DONE,     /* released (its figures below) */
    RF_EXEC_CTL_FAILED,   /* taken and failed (error below), or nothing could be released */
};

/* One managed model in a status answer. */
struct rf_exec_ctl_model {
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    uint64_t submits;   /* decode and encode calls since the load */
    uint32_t in_flight; /* submissions not completed */
    uint64_t idle_ms;   /* since the last submission's start or end */
    uint64_t id;        /* the last request's id (0: none) */
    enum rf_exec_ctl_state state;
    uint64_t asked_bytes;    /* what it asked */
    uint64_t accepted_bytes; /* what madvise accepted */
    int64_t change_bytes;    /* the mapping's Rss after - before, measured (negative: fell) */
    int error;               /* -errno of a failed request, 0 */
    char path[4096];         /* the model's path as loaded */
};

enum rf_exec_ctl_kind { RF_EXEC_CTL_STATUS = 0, RF_EXEC_CTL_RELEASE };

struct rf_exec_ctl_request {
    enum rf_exec_ctl_kind kind;
    uint32_t dev_major, dev_minor; /* release: the model file */
    uint64_t inode;
    uint64_t bytes; /* release: bytes to give back */
};

/* The request's line (with its newline) into buf. Returns its length, or -ENOSPC, -EINVAL. */
int rf_exec_ctl_format_request(const struct rf_exec_ctl_request *r, char *buf, size_t size);
/* Parses one request line (newline optional). 0, or -EBADMSG. */
int rf_exec_ctl_parse_request(const char *line, struct rf_exec_ctl_request *out);
/* A status answer's model line (with its newline). Its length, or -ENOSPC, -EINVAL. */
int rf_exec_ctl_format_model(const struct rf_exec_ctl_model *m, char *buf, size_t size);
/* Parses one "model ..." line (newline optional). 0, or -EBADMSG. */
int rf_exec_ctl_parse_model(const char *line, struct rf_exec_ctl_model *out);
/* "none", "waiting", "done", "failed". */
const char *rf_exec_ctl_state_name(enum rf_exec_ctl_state s);

/*
 * The runtime directory of the channel: runtime_env (RAMFORGE_RUNTIME_DIR)
 * when set, else xdg (XDG_RUNTIME_DIR) + "/ramforge", else "/run/ramforge"
 * for uid 0 and "/tmp/ramforge-UID" for the others. 0, or -ENAMETOOLONG.
 */
int rf_exec_ctl_runtime_dir(const char *runtime_env, const char *xdg, unsigned uid, char *out,
                            size_t size);
/* DIR/exec-PID.sock into out. 0, or -ENAMETOOLONG (a sun_path holds 108 bytes). */
int rf_exec_ctl_socket_path(const char *dir, int pid, char *out, size_t size);
/* Whether path names the channel of pid (its last component is exec-PID.sock). */
bool rf_exec_ctl_is_socket_of(const char *path, int pid);

#ifdef __cplusplus
}
#endif

#endif
