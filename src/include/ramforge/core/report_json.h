/*
 * The report's JSON writers (jansson), private to the project: the public
 * headers carry no jansson type. The session writes reports as text
 * (rf_session_report_json) or files (rf_session_report_write); ramforge's
 * own tools and tests use these.
 */
#ifndef RAMFORGE_CORE_REPORT_JSON_H
#define RAMFORGE_CORE_REPORT_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ramforge/core/report.h"
#include "ramforge/core/residency.h"

/*
 * Builds the document. *out is a new reference (json_decref). Text that
 * is not valid UTF-8 is written with U+FFFD in place of its bad bytes
 * (output.text_valid_utf8 says so for the generated text). Errors:
 * -ENOMEM, -RF_EJSON (a section could not be built; logged with its name).
 */
int rf_report_to_json(const struct rf_report *r, json_t **out);

/*
 * The inventory as JSON (ramforge inspect --json and the report's model
 * section): generation, page_bytes, mappings, totals and, when
 * with_entries, one object per tensor. Errors: -ENOMEM.
 */
int rf_inventory_to_json(const struct rf_inventory *inv, bool with_entries, json_t **out);

/*
 * The filesystem of statfs f_type magic (0: not known) and what page
 * figures and releases mean there (fs_profile.h): type, magic ("0x..."
 * or null), cachestat_valid, cachestat_note, page_figures_stable,
 * page_figures_caveat, cold_read_possible, release, release_note.
 * A new reference; NULL when out of memory.
 */
json_t *rf_fs_to_json(uint64_t magic);

/*
 * Writes a file atomically (src/core/file_write.c): emit(fd, ctx) writes
 * the content to a temporary file in path's directory, DIR/.NAME.tmp.TID
 * (TID: the calling thread's id, the process id in a single-threaded
 * program), and returns 0 or -errno; the file is then made mode 0644,
 * fsync'd and renamed over path, and the directory fsync'd. Any failure
 * before the rename removes the temporary file and leaves path as it was;
 * a process killed meanwhile leaves at most its temporary file. Errors:
 * -EINVAL (NULL or empty path, NULL emit), -EISDIR (path ends in '/'),
 * -ENOMEM, emit's, or -errno of the failing call (open: -EACCES, -EROFS,
 * -ENOENT; write and fsync: -ENOSPC, -EDQUOT, -EIO; rename); a failed
 * fsync of the directory is returned with the new file already in place.
 */
int rf_file_write_atomic(const char *path, int (*emit)(int fd, void *ctx), void *ctx);

/* rf_file_write_atomic of the NUL-terminated text. Errors: -EINVAL (NULL), as above. */
int rf_file_write_text(const char *path, const char *text);

/*
 * Writes len bytes of buf to fd, retrying short writes and EINTR, so a
 * full filesystem answers -ENOSPC rather than a short count. Errors:
 * -errno of write, -EIO for a write that made no progress.
 */
int rf_write_all(int fd, const void *buf, size_t len);

/*
 * Writes doc to path through a temporary file in the same directory and a
 * rename, so a failure leaves no partial file. Errors: -errno of the
 * failing call (the temporary file is removed).
 */
int rf_json_write_file(json_t *doc, const char *path);

/*
 * The snapshot as a JSON object: source, generation, page_bytes, coverage
 * (budget, the two populations with coverage_bp null when there is none,
 * selected resource counts, sampling_complete), sampler (calls, failures,
 * first_error text or null) and, with with_resources, resources[] (index,
 * mapping_index or null, first_page, end_page, inspected/resident/
 * nonresident/unknown pages, sampled, targeted). Page counts are JSON
 * integers (null past INT64_MAX). *out is owned by the caller
 * (json_decref). Errors: -EINVAL, -ENOMEM.
 */
int rf_residency_snapshot_to_json(const struct rf_residency_snapshot *s, bool with_resources,
                                  json_t **out);

/*
 * profile.persisted of the operation report: path, identity, used, reason,
 * operations, saved, save_reason, history_entries, history_max,
 * format_version; JSON null without --profile. NULL on allocation failure.
 */
json_t *rf_profile_persisted_json(const struct rf_report *r);

/*
 * The report's prediction section: release_authorized (always false),
 * note, reason (null when recorded), and with a record evidence,
 * page_bytes and the counters as {value, provenance}. NULL on allocation
 * failure.
 */
json_t *rf_prediction_json(const struct rf_report *r);

/*
 * The report's `streaming` object (storage traffic, and the streaming
 * policy's plan, pins and bound); json null for NULL. A new reference;
 * NULL on -ENOMEM.
 */
json_t *rf_stream_report_json(const struct rf_stream_report *sr);

#endif
