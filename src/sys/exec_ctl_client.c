/*
 * exec's control channel from the asking side
 * (ramforge/sys/exec_ctl_client.h): the socket found in the process's
 * /proc/PID/net/unix, one request written and its answer read under a
 * deadline, the peer checked to be the process asked. A watcher asks each
 * process once a reading.
 */
#include "ramforge/sys/exec_ctl_client.h"
#include "ramforge/core/exec_ctl.h"
#include "sys_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX (1u << 20) /* bytes: a status line per model, 16 models at most */

int rfsys_exec_ctl_find(const char *sysroot, int pid, char *path, size_t size)
{
    char pid_s[16], *text = NULL;
    int rc;

    snprintf(pid_s, sizeof(pid_s), "%d", pid);
    rc = rfsys__proc_slurp(sysroot, pid_s, "net/unix", &text);
    if (rc < 0)
        return rc;
    rc = -ENOENT;
    /* "Num RefCount Protocol Flags Type St Inode Path": the path is the 8th field */
    for (char *line = strchr(text, '\n'); line && rc == -ENOENT; line = strchr(line, '\n')) {
        line++;
        char *p = line;
        for (int field = 1; field < 8 && p; field++) {
            p += strspn(p, " ");
            p = strpbrk(p, " \n");
            if (p && *p == '\n')
                p = NULL;
        }
        if (!p)
            continue;
        p += strspn(p, " ");
        size_t n = strcspn(p, "\n");
        char one[4096];
        if (n == 0 || n >= sizeof(one))
            continue;
        memcpy(one, p, n);
        one[n] = '\0';
        if (!rf_exec_ctl_is_socket_of(one, pid))
            continue;
        rc = (size_t)snprintf(path, size, "%s", one) >= size ? -ENAMETOOLONG : 0;
    }
    free(text);
    return rc;
}

static long long left_ms(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
           (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* Waits for events on fd until the deadline: 0, -ETIMEDOUT, -errno. */
static int wait_fd(int fd, short events, const struct timespec *deadline)
{
    for (;;) {
        long long ms = left_ms(deadline);
        if (ms <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, (int)ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

int rfsys_exec_ctl_ask(const char *path, int pid, const char *line, int timeout_ms, char **answer)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct timespec deadline;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int fd, rc = 0;

    *answer = NULL;
    if (strlen(path) >= sizeof(a.sun_path))
        return -ENAMETOOLONG;
    memcpy(a.sun_path, path, strlen(path) + 1);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        rc = -errno;
        if (rc == -EAGAIN || rc == -EINPROGRESS)
            rc = -ETIMEDOUT; /* the listener's backlog is full: one request at a time */
        goto out;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        rc = -errno;
        goto out;
    }
    if (cred.pid != pid) {
        rc = -ESRCH; /* another process listens there: not the one asked */
        goto out;
    }
    for (size_t sent = 0, want = strlen(line); sent < want;) {
        ssize_t w = send(fd, line + sent, want - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN) {
            if ((rc = wait_fd(fd, POLLOUT, &deadline)) < 0)
                goto out;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            goto out;
        }
        sent += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    for (;;) {
        if (n + 4096 + 1 > cap) {
            if (cap >= ANSWER_MAX) {
                rc = -EMSGSIZE;
                goto out;
            }
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
        }
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r == 0)
            break;
        if (r < 0 && errno == EAGAIN) {
            if ((rc = wait_fd(fd, POLLIN, &deadline)) < 0)
                goto out;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            goto out;
        }
        n += (size_t)r;
    }
    buf[n] = '\0';
    *answer = buf;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}
