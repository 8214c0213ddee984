/*
 * Cache-condition preparation for `ramforge bench` (spec: "Cache-condition
 * preparation"): bringing a model file into a page-cache state before a run
 * process starts, and verifying that state with mincore (or cachestat).
 *
 *   warm                   the file is read with large read(2)s (its pages
 *                          enter the page cache), then verified resident
 *   isolated-nonresident   the model is copied once to a separate file
 *                          (the source is read with O_DIRECT where the file
 *                          system allows it, so its page-cache state is not
 *                          changed); before each run the copy is flushed,
 *                          posix_fadvise(POSIX_FADV_DONTNEED)'d and
 *                          verified nonresident
 *
 * Only files this process opens itself are touched: no global cache drop,
 * no privileged command, and the source model is only ever opened
 * O_RDONLY. A verification tells the file's page-cache state when the
 * model process starts; it is not proof of physical reclamation, PSS or
 * the model mapping's residency after loading.
 *
 * Also here: the isolated copy itself and the physical limit of a cold
 * load, a timed sequential read of the cold copy; and the directories bench
 * writes into. The workload is a handful of files of up to a few GiB;
 * every function reads or probes whole files in bounded windows.
 */
#ifndef RAMFORGE_BENCH_PREPARE_H
#define RAMFORGE_BENCH_PREPARE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/error.h"
#include "ramforge/sys/pages.h"

/* Bytes per read(2)/write(2) when copying, warming and timing files (8 MiB). */
#define BENCH_IO_BYTES (8u << 20)

/* Size of the error buffers filled below: one line, without the program name. */
#define BENCH_ERR_MAX RF_ERR_MAX /* ramforge/error.h */

/*
 * Preparations tried before a run keeps a label other than its condition's
 * own: a drop right after a write can leave pages the kernel was still
 * handling (the LRU batches), which the next drop takes.
 */
#define BENCH_PREPARE_ATTEMPTS 3

/* Cold reads of the copy for the physical limit; the fastest counts. */
#define BENCH_LIMIT_READS 3

/* The cache conditions a bench runs under, in the order of the CLI names. */
enum bench_condition { BENCH_COND_WARM = 0, BENCH_COND_ISOLATED = 1, BENCH_COND_N };

/* What the verification found before a run (labels of results.tsv and summary.json). */
enum bench_label {
    BENCH_LABEL_CONTROLLED = 0, /* isolated-nonresident: every probed page nonresident */
    BENCH_LABEL_WARM,           /* every probed page resident */
    BENCH_LABEL_PARTIAL,        /* neither: some pages of the wrong state */
    BENCH_LABEL_UNKNOWN,        /* some page's state could not be observed */
    BENCH_LABEL_FAILED,         /* the preparation itself failed (no copy, read error) */
    BENCH_LABEL_N
};

/* "warm", "isolated-nonresident"; NULL outside the enum. */
const char *bench_condition_name(enum bench_condition c);

/* Parses a condition name as bench_condition_name spells it. Returns 0 or -EINVAL. */
int bench_condition_parse(const char *name, enum bench_condition *out);

/* "controlled", "warm", "partial", "unknown", "failed"; NULL outside the enum. */
const char *bench_label_name(enum bench_label l);

/* Page-cache state of a whole file at one moment. */
struct bench_residency {
    uint64_t file_pages;           /* ceil(size / page size) */
    uint64_t resident_pages;       /* in the page cache */
    uint64_t nonresident_pages;    /* not in the page cache */
    uint64_t unknown_pages;        /* not observable (fake residency, sampler error) */
    enum rfsys_page_method method; /* how the states were found */
    int error;                     /* first open/sampler error (-errno), 0 if none */
};

/*
 * Probes every page of PATH with rfsys_file_pages_sample (a fresh read-only
 * mapping, not populated: nothing is read or evicted). Pages whose state the
 * kernel will not tell are unknown, never resident. Returns 0, or the
 * -errno of opening the file (then every field but error is zero).
 */
int bench_probe_file(const char *path, struct bench_residency *out);

/*
 * The label a run prepared for condition c gets from the verification r:
 * any unknown page (or an empty file) -> unknown; every page resident ->
 * warm; every page nonresident -> controlled for isolated-nonresident,
 * partial for warm; otherwise partial.
 */
enum bench_label bench_label_for(enum bench_condition c, const struct bench_residency *r);

/*
 * The label a completed run of condition c must have to count in the
 * condition's medians: warm for warm, controlled for isolated-nonresident.
 */
enum bench_label bench_own_label(enum bench_condition c);

/*
 * Brings PATH into condition c and verifies it: warm reads the file
 * (bench_read_file), isolated-nonresident drops it (bench_evict_file);
 * then bench_probe_file into *prep and bench_label_for into *label. Tried
 * up to BENCH_PREPARE_ATTEMPTS times until the label is c's own label or
 * unknown; *label is the last attempt's. Returns 0, or -errno of the read,
 * drop or probe (err gets the line; *prep and *label are then not
 * meaningful).
 */
int bench_prepare_condition(enum bench_condition c, const char *path, struct bench_residency *prep,
                            enum bench_label *label, char err[BENCH_ERR_MAX]);

/*
 * Reads PATH from start to end with BENCH_IO_BYTES read(2)s (buffered, with
 * POSIX_FADV_SEQUENTIAL), discarding the data: its pages enter the page
 * cache. *bytes (may be NULL) gets the bytes read and *ns (may be NULL) the
 * CLOCK_MONOTONIC time of the reads alone (open and close excluded).
 * Returns 0 or -errno; err gets "cannot read PATH: reason".
 */
int bench_read_file(const char *path, uint64_t *bytes, uint64_t *ns, char err[BENCH_ERR_MAX]);

/*
 * Flushes PATH (fsync: dirty pages cannot be dropped) and asks the kernel
 * to drop its cached pages with posix_fadvise(POSIX_FADV_DONTNEED) over
 * the whole file. Pages mapped by a live process may stay: verify with
 * bench_probe_file. Returns 0 or -errno; err gets the failing step.
 */
int bench_evict_file(const char *path, char err[BENCH_ERR_MAX]);

/* How bench_copy_file read its source. */
struct bench_copy_info {
    uint64_t bytes;          /* bytes copied (the source's size) */
    uint64_t ns;             /* time of the copy, fsync included */
    bool direct;             /* the source was read with O_DIRECT (its cache untouched) */
    bool restored;           /* buffered fallback: pages the read brought in were dropped again */
    const char *source_note; /* static: how the source's page cache was treated */
};

/*
 * Copies SRC to DST: DST is unlinked if it exists (never truncated in
 * place, so a hard link to SRC cannot be overwritten) and created with
 * O_EXCL; SRC is read with O_DIRECT when the file system accepts it, else
 * buffered, after which the SRC pages that were nonresident before the
 * copy are dropped again (posix_fadvise DONTNEED on those ranges only).
 * DST is fsync'd. With progress, a bar is drawn on stderr. On failure
 * (ENOSPC, EACCES, ENOTDIR, ...) DST is removed, err gets "cannot write
 * DST: reason" or "cannot read SRC: reason", and -errno is returned.
 */
int bench_copy_file(const char *src, const char *dst, bool progress, struct bench_copy_info *info,
                    char err[BENCH_ERR_MAX]);

/* The isolated copy and the physical limit measured on it. */
struct bench_copy {
    bool wanted; /* the isolated-nonresident condition was asked for */
    bool made;
    char path[PATH_MAX];
    char error[BENCH_ERR_MAX]; /* why it could not be made; "" */
    struct bench_copy_info info;
    bool read_measured; /* the timed read ran */
    uint64_t read_bytes;
    uint64_t read_ns;            /* the fastest of the BENCH_LIMIT_READS reads */
    enum bench_label read_label; /* the copy's state before the timed read */
    char read_error[BENCH_ERR_MAX];
};

/*
 * Makes the isolated copy of MODEL as DIR/isolated-<MODEL's base name>
 * (DIR created with its parents; bench_copy_file, with progress) and
 * measures the physical limit on it: BENCH_LIMIT_READS times the copy is
 * dropped and verified (up to BENCH_PREPARE_ATTEMPTS drops) and read
 * whole with bench_read_file; the fastest read counts, since a shared
 * machine only ever slows a read down. Fills cp's fields other than
 * wanted. Returns 0 when the copy was made (read_measured and read_error
 * tell how the limit went), or -errno when not (cp->error has the line).
 */
int bench_copy_make(const char *model, const char *dir, bool progress, struct bench_copy *cp);

/*
 * Like mkdir -p, mode 0755. Returns 0 or -errno (-ENOTDIR when PATH or a
 * parent is not a directory).
 */
int bench_mkdir_p(const char *path);

/*
 * Creates DIR (and parents) and checks a file can be created in it (a
 * temporary file, removed at once). Returns 0 or -errno.
 */
int bench_make_output_dir(const char *dir);

#endif
