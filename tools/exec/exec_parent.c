/*
 * ramforge exec's parent (exec_parent.h): with --memory-limit or
 * --metrics-listen, exec forks instead of replacing itself; the child runs
 * PROGRAM (in the cgroup of --memory-limit), the parent waits for it
 * (limit_cgroup_supervise: signals passed on, the cgroup removed at exit)
 * and serves /metrics.
 *
 * Where the figures come from. The engine in PROGRAM (and in each child
 * process PROGRAM starts) writes its model's Prometheus text (the
 * session's families and ramforge_exec_*, as --metrics-file) into a
 * private spool directory, SPOOL/PID.prom[.N], at each boundary that ends
 * an operation. A scrape reads, at that moment: each spooled process's
 * VmRSS (/proc/PID/status) and its model mapping's Rss (/proc/PID/smaps,
 * the model file's mappings), PROGRAM's memory cgroup (usage and limit),
 * then the spooled texts merged family by family (one HELP and TYPE each).
 * A spooled process that has exited is dropped (its file removed).
 */
#include "exec_parent.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/limit_cgroup.h"
#include "common/metrics_listen.h"
#include "ramforge/session/metrics.h"
#include "ramforge/sys/sys.h"

#define SPOOL_FILE_MAX_BYTES (1u << 20) /* one model's text is a few KiB */
#define SPOOL_ENV "RAMFORGE_EXEC_METRICS_SPOOL"

/* The value of the first path="..." label of text, unescaped, into out; false: none. */
static bool path_label(const char *text, char *out, size_t size)
{
    const char *p = strstr(text, ",path=\"");
    size_t n = 0;
    if (!p)
        return false;
    for (p += 7; *p && *p != '"' && n + 1 < size; p++) {
        char c = *p;
        if (c == '\\' && p[1])
            c = *++p == 'n' ? '\n' : *p; /* rf_prom_label's escapes: \\ \" \n */
        out[n++] = c;
    }
    out[n] = '\0';
    return *p == '"';
}

/* One spooled text: its process, and its text. */
struct spooled {
    long pid;
    char *text;
};

/* The spool's texts of processes alive (up to max), into v; the count. */
static size_t read_spool(const char *dir, struct spooled *v, size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    while (d && n < max && (e = readdir(d))) {
        char path[PATH_MAX], *end;
        long pid = strtol(e->d_name, &end, 10);
        if (e->d_name[0] == '.' || pid <= 0 || strncmp(end, ".prom", 5) != 0 ||
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue;
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
            unlink(path); /* the process ended: its figures are gone with it */
            continue;
        }
        if (rfsys_slurp(NULL, path, SPOOL_FILE_MAX_BYTES, &v[n].text, NULL) == 0)
            v[n++].pid = pid;
    }
    if (d)
        closedir(d);
    return n;
}

/* The line of text at *p (its end excluded), advancing *p past it; false at the end. */
static bool next_line(const char **p, const char **line, size_t *len)
{
    if (!**p)
        return false;
    *line = *p;
    *len = strcspn(*p, "\n");
    *p += *len + ((*p)[*len] == '\n');
    return true;
}

/* Whether line is a sample of the family name (name followed by '{' or ' '). */
static bool sample_of(const char *line, size_t len, const char *name, size_t name_len)
{
    return len > name_len && line[0] != '#' && !strncmp(line, name, name_len) &&
           (line[name_len] == '{' || line[name_len] == ' ');
}

/* A line of a spooled text as the engine wrote it (rf_prom's), and its newline. */
static void raw_line(struct rf_prom *f, const char *line, size_t len)
{
    rf_prom_raw(f, line, len);
    rf_prom_raw(f, "\n", 1);
}

/* The texts v[0..n) merged: each family's HELP and TYPE once, then every text's samples. */
static void merge(struct rf_prom *f, const struct spooled *v, size_t n)
{
    for (size_t t = 0; t < n; t++) {
        const char *p = v[t].text, *line;
        size_t len;
        while (next_line(&p, &line, &len)) {
            if (strncmp(line, "# HELP ", 7) != 0)
                continue;
            const char *name = line + 7;
            size_t name_len = strcspn(name, " \n");
            bool seen = false; /* in an earlier text: merged there */
            for (size_t u = 0; u < t && !seen; u++) {
                const char *q = v[u].text, *l;
                size_t ll;
                while (!seen && next_line(&q, &l, &ll))
                    seen = ll > name_len + 7 && !strncmp(l, line, name_len + 8);
            }
            if (seen)
                continue;
            raw_line(f, line, len);
            const char *type = p; /* the TYPE line follows its HELP */
            if (next_line(&type, &line, &len) && !strncmp(line, "# TYPE ", 7))
                raw_line(f, line, len);
            for (size_t u = t; u < n; u++) {
                const char *q = v[u].text, *l;
                size_t ll;
                while (next_line(&q, &l, &ll))
                    if (sample_of(l, ll, name, name_len))
                        raw_line(f, l, ll);
            }
        }
    }
}

/* The Rss of the model file's mappings in process pid; false when unknown. */
static bool mapping_rss(long pid, const char *model, uint64_t *rss_bytes)
{
    struct rfsys_maps maps;
    struct rfsys_mapping_sum sum;
    struct stat st;
    char pid_text[24];
    bool ok = false;

    snprintf(pid_text, sizeof(pid_text), "%ld", pid);
    rfsys_maps_init(&maps);
    if (stat(model, &st) == 0 && rfsys_read_smaps(NULL, pid_text, &maps) == 0 &&
        rfsys_maps_sum_file(&maps, major(st.st_dev), minor(st.st_dev), st.st_ino, NULL, &sum) ==
            0 &&
        sum.complete) {
        *rss_bytes = sum.rss_bytes;
        ok = true;
    }
    rfsys_maps_free(&maps);
    return ok;
}

/* The figures read now: each spooled process's VmRSS and mapping Rss, PROGRAM's cgroup. */
static void live(struct rf_prom *f, long child, const struct spooled *v, size_t n)
{
    char pid_text[24], model[PATH_MAX];
    struct rfsys_status st;
    struct rfsys_cgroup_memory cg;
    uint64_t rss;

    rf_prom_family(
        f, "ramforge_live_process_rss_bytes", "gauge",
        "VmRSS read at scrape time (/proc/PID/status) of the program and of each process "
        "whose model ramforge manages.");
    for (size_t i = 0; i <= n; i++) { /* the program (before any load too), then the spool's */
        long pid = i == 0 ? child : v[i - 1].pid;
        bool dup = pid <= 0; /* a process with two models: one VmRSS */
        for (size_t j = 0; j + 1 < i; j++)
            dup |= v[j].pid == pid;
        dup |= i > 0 && pid == child;
        snprintf(pid_text, sizeof(pid_text), "%ld", pid);
        if (!dup && rfsys_read_status(NULL, pid_text, &st) == 0 && st.has_vm_rss) {
            rf_prom_sample(f, "ramforge_live_process_rss_bytes");
            rf_prom_label(f, "pid", pid_text);
            rf_prom_u64(f, st.vm_rss_bytes);
        }
    }
    rf_prom_family(
        f, "ramforge_live_mapping_rss_bytes", "gauge",
        "Resident bytes of the model file's mappings read at scrape time (/proc/PID/smaps).");
    for (size_t i = 0; i < n; i++) {
        if (!path_label(v[i].text, model, sizeof(model)) || !mapping_rss(v[i].pid, model, &rss))
            continue;
        snprintf(pid_text, sizeof(pid_text), "%ld", v[i].pid);
        rf_prom_sample(f, "ramforge_live_mapping_rss_bytes");
        rf_prom_label(f, "pid", pid_text);
        rf_metrics_model_labels(f, model);
        rf_prom_u64(f, rss);
    }
    snprintf(pid_text, sizeof(pid_text), "%ld", child);
    bool has_cg = child > 0 && rfsys_read_cgroup_memory(NULL, pid_text, &cg) == 0 &&
                  cg.version != RFSYS_CGROUP_NONE;
    rf_prom_family(f, "ramforge_live_cgroup_current_bytes", "gauge",
                   "The program's memory cgroup usage read at scrape time (memory.current or "
                   "memory.usage_in_bytes).");
    if (has_cg && cg.has_current) {
        rf_prom_sample(f, "ramforge_live_cgroup_current_bytes");
        rf_prom_label(f, "pid", pid_text);
        rf_prom_u64(f, cg.current_bytes);
    }
    rf_prom_family(
        f, "ramforge_live_cgroup_limit_bytes", "gauge",
        "The program's memory cgroup effective hard limit read at scrape time; absent when "
        "none.");
    if (has_cg && cg.has_limit && !cg.limit_unlimited) {
        rf_prom_sample(f, "ramforge_live_cgroup_limit_bytes");
        rf_prom_label(f, "pid", pid_text);
        rf_prom_u64(f, cg.limit_bytes);
    }
}

#define SPOOL_MAX_TEXTS 64 /* processes x models one scrape reads */

static char *render(void *ud)
{
    struct exec_parent *p = ud;
    struct spooled v[SPOOL_MAX_TEXTS];
    struct rf_prom f;
    char *text = NULL;
    size_t n = read_spool(p->spool, v, SPOOL_MAX_TEXTS);
    rf_prom_init(&f);
    live(&f, (long)atomic_load(&p->child), v, n);
    merge(&f, v, n);
    for (size_t i = 0; i < n; i++)
        free(v[i].text);
    return rf_prom_take(&f, &text) == 0 ? text : NULL;
}

/* Removes the spool directory and what is in it. */
static void remove_spool(struct exec_parent *p)
{
    DIR *d = p->spool[0] ? opendir(p->spool) : NULL;
    struct dirent *e;
    char path[PATH_MAX];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(path, sizeof(path), "%s/%s", p->spool, e->d_name) < (int)sizeof(path))
            unlink(path);
    if (d)
        closedir(d);
    if (p->spool[0] && rmdir(p->spool) < 0)
        cli_error("exec: cannot remove %s: %s", p->spool, strerror(errno));
    p->spool[0] = '\0';
}

static int start(void *ud)
{
    struct exec_parent *p = ud;
    const char *tmp = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    if (!p->listen)
        return 0;
    snprintf(tmpl, sizeof(tmpl), "%s/rf-exec-metrics-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(tmpl)) {
        cli_error("exec: cannot create %s: %s", tmpl, strerror(errno));
        return -1;
    }
    snprintf(p->spool, sizeof(p->spool), "%s", tmpl);
    char *env = NULL;
    if (asprintf(&env, "%s/%%p.prom", p->spool) < 0 || setenv(SPOOL_ENV, env, 1) < 0 ||
        metrics_listen_start("--metrics-listen", p->listen, true, render, p) < 0) {
        free(env);
        remove_spool(p);
        return -1;
    }
    free(env);
    return 0;
}

static void child(pid_t pid, void *ud)
{
    atomic_store(&((struct exec_parent *)ud)->child, (int)pid);
}

static void stop(void *ud)
{
    struct exec_parent *p = ud;
    if (!p->listen)
        return;
    metrics_listen_stop();
    remove_spool(p);
}

int exec_parent_run(struct exec_parent *p, const uint64_t *limit_bytes)
{
    const struct limit_parent hooks = {.start = start, .child = child, .stop = stop, .ud = p};
    return limit_cgroup_supervise("rf-exec-", limit_bytes, false, p->streaming, &hooks);
}
