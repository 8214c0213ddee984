/*
 * The save of the session's persisted access profile
 * (rf_session_profile_save, session_ext.h). Under an exclusive flock(2) on
 * the profile's directory, the file is read again, what this process added
 * since it read it (operations, its latest complete trace, its history
 * entries) is merged into it (rf_profile_merge), and the result replaces it
 * atomically (a temporary file renamed over it): concurrent runs sharing
 * one profile lose no update, and a reader never sees half a file. The
 * directory, not the file, is locked: the rename replaces the file's inode,
 * and a profile not written yet has none. A file that became unreadable,
 * unparsable or another model's meanwhile is left as it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "ramforge/core/report_json.h"
#include "ramforge/error.h"
#include "session_internal.h"

static int emit_text(int fd, void *ctx)
{
    const char *text = ctx;
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        done += (size_t)w;
    }
    return write(fd, "\n", 1) == 1 ? 0 : -errno;
}

/* Opens the directory of path and locks it (LOCK_EX, waits); its fd or -errno. */
static int lock_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 ? -errno : 0;
    free(copy);
    while (rc == 0 && flock(fd, LOCK_EX) < 0)
        if (errno != EINTR)
            rc = -errno;
    if (rc < 0 && fd >= 0)
        close(fd);
    return rc < 0 ? rc : fd;
}

/*
 * Writes ps->prof merged into the file as it is now (or as it is, with no
 * file), the directory locked, and continues from what was written.
 * *refused (with ps->save_reason) when the file may no longer be replaced.
 * 0 or -errno of the lock, the merge or the write.
 */
static int save_merged(struct session_persist *ps, bool *refused)
{
    struct rf_profile disk;
    char why[RF_ERR_MAX] = "";
    char *text = NULL;
    size_t len = 0;
    bool merge = false;

    *refused = false;
    rf_profile_init(&disk);
    int lock = lock_dir(ps->path);
    if (lock < 0)
        return lock;
    int rc = ses_profile_read(ps->path, &text, &len);
    if (rc == 0) {
        rc = rf_profile_parse(text, len, ps->prof.max_history, &disk, why, sizeof(why));
        free(text);
        text = NULL;
        if (rc == -ENOMEM)
            goto out;
        if (rc == 0 &&
            rf_profile_matches(&disk, ps->identity, ps->file_size_bytes, why, sizeof(why))) {
            rc = rf_profile_merge(&disk, &ps->prof, ps->base_operations, ps->traced,
                                  ps->n_new_history);
            merge = true;
        } else {
            *refused = true;
        }
    } else if (rc != -ENOENT) { /* no file (any more): ours as it is */
        snprintf(why, sizeof(why), "%s", ses_profile_read_error(rc));
        *refused = rc != -ENOMEM;
    } else {
        rc = 0;
    }
    if (*refused) {
        snprintf(ps->save_reason, sizeof(ps->save_reason),
                 "not saved: %s changed since it was read (%s); it is left as it is", ps->path,
                 why);
        rc = 0;
        goto out;
    }
    if (rc < 0 || (rc = rf_profile_to_text(merge ? &disk : &ps->prof, &text)) < 0 ||
        (rc = rf_file_write_atomic(ps->path, emit_text, text)) < 0)
        goto out;
    if (merge) { /* the file's profile is this process's from now on */
        struct rf_profile old = ps->prof;
        ps->prof = disk;
        disk = old;
    }
    ps->base_operations = ps->prof.operations;
    ps->n_new_history = 0;
    ps->traced = false;
out:
    free(text);
    rf_profile_free(&disk);
    close(lock); /* releases the lock */
    return rc;
}

int rf_session_profile_save(struct rf_session *s, bool *saved, char err[RF_SESSION_PROFILE_ERR_MAX])
{
    if (saved)
        *saved = false;
    if (!s || !err)
        return -EINVAL;
    struct session_persist *ps = &s->persist;
    bool refused = false;
    int rc;

    err[0] = 0;
    if (!ps->path)
        return -EINVAL;
    ps->saved = false;
    if (!ps->writable) {
        snprintf(ps->save_reason, sizeof(ps->save_reason), "not saved: %s", ps->reason);
        rc = 0;
    } else if (!ps->prof.identity[0]) {
        snprintf(ps->save_reason, sizeof(ps->save_reason),
                 "not saved: no complete dispatch trace made a profile yet "
                 "(run with --observe-dispatch)");
        rc = 0;
    } else if ((rc = save_merged(ps, &refused)) == 0) {
        ps->saved = !refused;
        if (ps->saved)
            ps->save_reason[0] = 0;
    } else {
        snprintf(ps->save_reason, sizeof(ps->save_reason),
                 "cannot save profile %s: %s; the previous file is left as it was", ps->path,
                 rf_strerror(rc));
    }
    if (!ps->saved)
        snprintf(err, RF_SESSION_PROFILE_ERR_MAX, "%s", ps->save_reason);
    if (saved)
        *saved = ps->saved;
    ses_profile_fill_report(s);
    return rc;
}
