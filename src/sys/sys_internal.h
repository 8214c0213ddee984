/*
 * Helpers shared by the rfsys parsers (slurp.c defines them). Not part of
 * the public API: nothing outside src/sys includes this header.
 */
#ifndef RAMFORGE_SYS_INTERNAL_H
#define RAMFORGE_SYS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Bound for single-value cgroup files and memory.events: 64 KiB. */
#define RFSYS_SMALL_FILE_BYTES (64u << 10)

/*
 * Writes SYSROOT + PATH into buf (size bytes, NUL-terminated). A NULL or ""
 * sysroot means the real root. Returns 0, -EINVAL for a NULL path, or
 * -ENAMETOOLONG when the result does not fit.
 */
int rfsys__path(char *buf, size_t size, const char *sysroot, const char *path);

/*
 * Writes "/proc/PID/NAME" into buf. PID must be "self" or 1..10 decimal
 * digits (-EINVAL otherwise, which also keeps "../" out of the path).
 * Returns 0, -EINVAL or -ENAMETOOLONG.
 */
int rfsys__proc_path(char *buf, size_t size, const char *pid, const char *name);

/*
 * Cuts the next line out of the NUL-terminated text at *cursor: replaces its
 * '\n' (if any) with NUL, advances *cursor past it and returns the line.
 * Returns NULL at the end of the text. A last line without '\n' is returned
 * like any other; an empty text has no lines.
 */
char *rfsys__next_line(char **cursor);

/*
 * Parses an unsigned number in base 10 or 16 at *sp (digits only: no sign,
 * no blanks, no "0x"), advancing *sp past it. Returns 0, -EINVAL when there
 * is no digit, or -ERANGE when the value does not fit in 64 bits.
 */
int rfsys__parse_u64(const char **sp, int base, uint64_t *out);

/*
 * Parses a procfs size value "<blanks><decimal> kB<blanks>" (the text after
 * "Field:") into bytes. Returns 0, -EBADMSG when the text has another shape,
 * or -EOVERFLOW when the number or number * 1024 does not fit in 64 bits.
 */
int rfsys__parse_kb(const char *s, uint64_t *bytes_out);

#endif
