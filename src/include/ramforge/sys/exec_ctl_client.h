/*
 * The asking side of exec's control channel (ramforge/core/exec_ctl.h):
 * finding the socket of a process under ramforge exec, and one request
 * answered. Every call returns 0 or a negative errno; nothing prints.
 */
#ifndef RAMFORGE_SYS_EXEC_CTL_CLIENT_H
#define RAMFORGE_SYS_EXEC_CTL_CLIENT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The path of pid's control socket, from SYSROOT/proc/PID/net/unix (the
 * sockets of its network namespace: the one named .../exec-PID.sock), so
 * that a watcher finds it whatever runtime directory the process chose.
 * Errors: -ENOENT (none: the process is not under exec, or its engine did
 * not start the channel), -ENAMETOOLONG, those of rfsys_slurp (-ESRCH,
 * -ENOENT when the process is gone).
 */
int rfsys_exec_ctl_find(const char *sysroot, int pid, char *path, size_t size);

/*
 * Sends line to the socket at path and reads the answer to its end into
 * *answer (NUL-terminated; the caller frees it), within timeout_ms. The
 * peer must be pid (SO_PEERCRED): a socket another process answers on (a
 * stale file, a pid reused) is -ESRCH. Errors: -ENOENT, -ECONNREFUSED (no
 * one listens), -EACCES (the socket is another user's: 0600),
 * -ETIMEDOUT, -EMSGSIZE (an answer over 1 MiB), -ENAMETOOLONG, -errno.
 */
int rfsys_exec_ctl_ask(const char *path, int pid, const char *line, int timeout_ms, char **answer);

#ifdef __cplusplus
}
#endif

#endif
