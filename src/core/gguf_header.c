/*
 * ramforge's own GGUF header check (see ramforge/core/gguf_header.h).
 *
 * The header is read front to back through a 64 KiB window: key/value
 * pairs are skipped (only general.alignment is kept), tensor infos are
 * checked one by one. Nothing is allocated per key or tensor, so a
 * header with a million entries costs its read and no memory. Every size
 * derived from a header field goes through __builtin_*_overflow; a field
 * that would make a size wrap is an error, never a small number.
 *
 * The layout (gguf.h): "GGUF", u32 version, i64 n_tensors, i64 n_kv; n_kv
 * times (string key, i32 type, value); n_tensors times (string name, u32
 * n_dims, i64 ne[n_dims], i32 type, u64 offset); padding to the
 * alignment; the data section. A string is a u64 length and its bytes.
 * Little-endian throughout (the only byte order gguf reads here).
 */
#include "ramforge/core/gguf_header.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

/* Bytes the check asks the read callback for at a time. */
#define WINDOW_BYTES (64u << 10)

/* GGUF value types (gguf.h's enum gguf_type). */
enum {
    GT_UINT8 = 0,
    GT_INT8 = 1,
    GT_UINT16 = 2,
    GT_INT16 = 3,
    GT_UINT32 = 4,
    GT_INT32 = 5,
    GT_FLOAT32 = 6,
    GT_BOOL = 7,
    GT_STRING = 8,
    GT_ARRAY = 9,
    GT_UINT64 = 10,
    GT_INT64 = 11,
    GT_FLOAT64 = 12,
};

/* Block elements and block bytes per ggml type id; 0 0 for ids gguf cannot hold. */
static const struct {
    uint16_t block_elems;
    uint16_t block_bytes;
} type_layout[] = {
    [0] = {1, 4},      /* f32 */
    [1] = {1, 2},      /* f16 */
    [2] = {32, 18},    /* q4_0 */
    [3] = {32, 20},    /* q4_1 */
    [6] = {32, 22},    /* q5_0 */
    [7] = {32, 24},    /* q5_1 */
    [8] = {32, 34},    /* q8_0 */
    [9] = {32, 36},    /* q8_1 */
    [10] = {256, 84},  /* q2_K */
    [11] = {256, 110}, /* q3_K */
    [12] = {256, 144}, /* q4_K */
    [13] = {256, 176}, /* q5_K */
    [14] = {256, 210}, /* q6_K */
    [15] = {256, 292}, /* q8_K */
    [16] = {256, 66},  /* iq2_xxs */
    [17] = {256, 74},  /* iq2_xs */
    [18] = {256, 98},  /* iq3_xxs */
    [19] = {256, 50},  /* iq1_s */
    [20] = {32, 18},   /* iq4_nl */
    [21] = {256, 110}, /* iq3_s */
    [22] = {256, 82},  /* iq2_s */
    [23] = {256, 136}, /* iq4_xs */
    [24] = {1, 1},     /* i8 */
    [25] = {1, 2},     /* i16 */
    [26] = {1, 4},     /* i32 */
    [27] = {1, 8},     /* i64 */
    [28] = {1, 8},     /* f64 */
    [29] = {256, 56},  /* iq1_m */
    [30] = {1, 2},     /* bf16 */
    [34] = {256, 54},  /* tq1_0 */
    [35] = {256, 66},  /* tq2_0 */
    [39] = {32, 17},   /* mxfp4 */
    [40] = {64, 36},   /* nvfp4 */
    [41] = {128, 18},  /* q1_0 */
    [42] = {64, 18},   /* q2_0 */
};

bool rf_gguf_type_layout(uint32_t type, uint64_t *block_elems, uint64_t *block_bytes)
{
    if (type >= sizeof(type_layout) / sizeof(type_layout[0]) || !type_layout[type].block_elems)
        return false;
    *block_elems = type_layout[type].block_elems;
    *block_bytes = type_layout[type].block_bytes;
    return true;
}

/* The header being read: a window of the file and the position in it. */
struct cursor {
    rf_gguf_read_fn read;
    void *ctx;
    uint64_t file_bytes;
    uint64_t pos;       /* next byte to consume, file offset */
    unsigned char *win; /* WINDOW_BYTES */
    uint64_t win_off;   /* file offset of win[0] */
    size_t win_len;     /* valid bytes in win */
    char *err;
    size_t err_size;
};

static int fail(struct cursor *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct cursor *c, int rc, const char *fmt, ...)
{
    va_list ap;

    if (c->err && c->err_size) {
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_size, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Copies n bytes at the position into dst and consumes them. */
static int get(struct cursor *c, void *dst, size_t n, const char *what)
{
    unsigned char *d = dst;
    uint64_t end;

    if (__builtin_add_overflow(c->pos, (uint64_t)n, &end) || end > c->file_bytes)
        return fail(c, -RF_EBADMODEL, "truncated or corrupt GGUF header (%s at byte %llu)", what,
                    (unsigned long long)c->pos);
    while (n > 0) {
        if (c->pos < c->win_off || c->pos >= c->win_off + c->win_len) {
            uint64_t left = c->file_bytes - c->pos;
            size_t want = left < WINDOW_BYTES ? (size_t)left : WINDOW_BYTES;
            long got = c->read(c->ctx, c->pos, c->win, want);

            if (got < 0)
                return fail(c, (int)got, "read error at byte %llu: %s", (unsigned long long)c->pos,
                            rf_strerror((int)got));
            if (got == 0 || (size_t)got > want)
                return fail(c, -EIO, "short read at byte %llu (the file changed?)",
                            (unsigned long long)c->pos);
            c->win_off = c->pos;
            c->win_len = (size_t)got;
        }
        size_t at = (size_t)(c->pos - c->win_off);
        size_t k = c->win_len - at < n ? c->win_len - at : n;
        memcpy(d, c->win + at, k);
        d += k;
        n -= k;
        c->pos += k;
    }
    return 0;
}

/* Consumes n bytes without looking at them; they must lie inside the file. */
static int skip(struct cursor *c, uint64_t n, const char *what)
{
    uint64_t end;

    if (__builtin_add_overflow(c->pos, n, &end) || end > c->file_bytes)
        return fail(c, -RF_EBADMODEL,
                    "truncated or corrupt GGUF header (%s of %llu bytes at byte %llu)", what,
                    (unsigned long long)n, (unsigned long long)c->pos);
    c->pos = end;
    return 0;
}

static int get_u32(struct cursor *c, uint32_t *v, const char *what)
{
    unsigned char b[4] = {0};
    int rc = get(c, b, sizeof(b), what);

    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return rc;
}

static int get_u64(struct cursor *c, uint64_t *v, const char *what)
{
    uint32_t lo, hi = 0;
    int rc = get_u32(c, &lo, what);

    if (rc == 0)
        rc = get_u32(c, &hi, what);
    *v = (uint64_t)hi << 32 | lo;
    return rc;
}

/*
 * Reads a string; its first cap - 1 bytes (at most) go to buf, NUL
 * terminated, and *len receives its full length. The rest is skipped.
 */
static int get_string(struct cursor *c, char *buf, size_t cap, uint64_t *len, const char *what)
{
    int rc = get_u64(c, len, what);

    if (rc < 0)
        return rc;
    size_t keep = *len < cap - 1 ? (size_t)*len : cap - 1;
    rc = get(c, buf, keep, what);
    if (rc < 0)
        return rc;
    buf[keep] = '\0';
    return skip(c, *len - keep, what);
}

/*
 * Replaces the control bytes of s (below 0x20, 0x7f) with '?': names from
 * the file go into one-line messages, and a '\n' or an escape sequence
 * must not reach the terminal as such.
 */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

/* Bytes of one value of a fixed-size GGUF type; 0 for string, array and unknown types. */
static uint64_t value_bytes(uint32_t type)
{
    switch (type) {
    case GT_UINT8:
    case GT_INT8:
    case GT_BOOL:
        return 1;
    case GT_UINT16:
    case GT_INT16:
        return 2;
    case GT_UINT32:
    case GT_INT32:
    case GT_FLOAT32:
        return 4;
    case GT_UINT64:
    case GT_INT64:
    case GT_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* Skips the value of key (type already read); general.alignment is kept in *alignment. */
static int read_value(struct cursor *c, const char *name, uint32_t type, uint64_t *alignment)
{
    char scratch[8], key[RF_GGUF_MAX_NAME];
    uint64_t len;
    int rc;

    snprintf(key, sizeof(key), "%s", name);
    printable(key);

    if (strcmp(name, "general.alignment") == 0) {
        uint32_t a;
        if (type != GT_UINT32)
            return fail(c, -RF_EBADMODEL, "key 'general.alignment' is not a u32");
        rc = get_u32(c, &a, "general.alignment");
        if (rc < 0)
            return rc;
        if (a == 0 || (a & (a - 1)) != 0)
            return fail(c, -RF_EBADMODEL, "general.alignment %u is not a power of two", a);
        *alignment = a;
        return 0;
    }
    if (type == GT_STRING)
        return get_string(c, scratch, sizeof(scratch), &len, "string value");
    if (type != GT_ARRAY) {
        if (!value_bytes(type))
            return fail(c, -RF_EBADMODEL, "key '%s' has unknown value type %u", key, type);
        return skip(c, value_bytes(type), "value");
    }

    uint32_t elem_type;
    uint64_t n, bytes;
    rc = get_u32(c, &elem_type, "array type");
    if (rc == 0)
        rc = get_u64(c, &n, "array length");
    if (rc < 0)
        return rc;
    if (elem_type == GT_STRING) {
        /* Each string is at least its 8-byte length: n is bounded by the file. */
        if (n > (c->file_bytes - c->pos) / 8)
            return fail(c, -RF_EBADMODEL,
                        "key '%s': array of %llu strings past the end of the file", key,
                        (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            rc = get_string(c, scratch, sizeof(scratch), &len, "array string");
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (!value_bytes(elem_type))
        return fail(c, -RF_EBADMODEL, "key '%s' is an array of unsupported type %u", key,
                    elem_type);
    if (__builtin_mul_overflow(n, value_bytes(elem_type), &bytes))
        return fail(c, -RF_EBADMODEL, "key '%s': array of %llu elements overflows", key,
                    (unsigned long long)n);
    return skip(c, bytes, "array");
}

/*
 * Reads and checks one tensor info; name receives its name, *end offset +
 * bytes (relative to the data section).
 */
static int read_tensor(struct cursor *c, uint64_t i, uint64_t alignment,
                       char name[RF_GGUF_MAX_NAME], uint64_t *end)
{
    uint64_t name_len, ne[RF_GGUF_MAX_DIMS], elems = 1, block_elems, block_bytes, rows, bytes,
                                             offset;
    uint32_t n_dims, type;
    int rc;

    rc = get_string(c, name, RF_GGUF_MAX_NAME, &name_len, "tensor name");
    if (rc < 0)
        return rc;
    printable(name); /* only messages use it */
    if (name_len == 0)
        return fail(c, -RF_EBADMODEL, "tensor %llu has an empty name", (unsigned long long)i);
    if (name_len >= RF_GGUF_MAX_NAME)
        return fail(c, -RF_EBADMODEL, "tensor '%s...' has a name of %llu bytes (at most %d)", name,
                    (unsigned long long)name_len, RF_GGUF_MAX_NAME - 1);
    if (memchr(name, '\0', (size_t)name_len))
        return fail(c, -RF_EBADMODEL, "tensor %llu has a NUL byte in its name",
                    (unsigned long long)i);
    rc = get_u32(c, &n_dims, "tensor dimensions");
    if (rc < 0)
        return rc;
    if (n_dims == 0 || n_dims > RF_GGUF_MAX_DIMS)
        return fail(c, -RF_EBADMODEL, "tensor '%s' has %u dimensions (1 to %d)", name, n_dims,
                    RF_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < n_dims; d++) {
        rc = get_u64(c, &ne[d], "tensor shape");
        if (rc < 0)
            return rc;
        if (ne[d] == 0 || ne[d] > (uint64_t)INT64_MAX)
            return fail(c, -RF_EBADMODEL, "tensor '%s' has dimension %u of %lld elements", name, d,
                        (long long)ne[d]);
        if (__builtin_mul_overflow(elems, ne[d], &elems) || elems > (uint64_t)INT64_MAX)
            return fail(c, -RF_EBADMODEL, "tensor '%s': element count overflows", name);
    }
    rc = get_u32(c, &type, "tensor type");
    if (rc == 0)
        rc = get_u64(c, &offset, "tensor offset");
    if (rc < 0)
        return rc;
    if (!rf_gguf_type_layout(type, &block_elems, &block_bytes))
        return fail(c, -RF_EBADMODEL, "tensor '%s' has unknown type %u", name, type);
    if (ne[0] % block_elems != 0)
        return fail(c, -RF_EBADMODEL,
                    "tensor '%s': %llu elements per row is not a multiple of the block size %llu",
                    name, (unsigned long long)ne[0], (unsigned long long)block_elems);
    /* bytes = ne[0] / block * block_bytes per row, times the other dimensions. */
    rows = elems / ne[0];
    if (__builtin_mul_overflow(ne[0] / block_elems, block_bytes, &bytes) ||
        __builtin_mul_overflow(bytes, rows, &bytes) || bytes > (uint64_t)INT64_MAX)
        return fail(c, -RF_EBADMODEL, "tensor '%s': byte size overflows", name);
    if (offset % alignment != 0)
        return fail(c, -RF_EBADMODEL, "tensor '%s' has offset %llu, not a multiple of %llu", name,
                    (unsigned long long)offset, (unsigned long long)alignment);
    if (__builtin_add_overflow(offset, bytes, end))
        return fail(c, -RF_EBADMODEL, "tensor '%s': offset + size overflows", name);
    return 0; /* checked against the file once the data offset is known */
}

int rf_gguf_header_check(rf_gguf_read_fn read, void *ctx, uint64_t file_bytes,
                         struct rf_gguf_header_info *info, char *err, size_t err_size)
{
    struct cursor c = {
        .read = read, .ctx = ctx, .file_bytes = file_bytes, .err = err, .err_size = err_size};
    struct rf_gguf_header_info h = {.alignment_bytes = RF_GGUF_DEFAULT_ALIGNMENT};
    unsigned char magic[4];
    uint64_t tensors_at, max_end = 0;
    int rc;

    if (err && err_size)
        err[0] = '\0';
    if (info)
        memset(info, 0, sizeof(*info));
    if (!read)
        return -EINVAL;
    c.win = malloc(WINDOW_BYTES);
    if (!c.win)
        return fail(&c, -ENOMEM, "out of memory");

    rc = get(&c, magic, sizeof(magic), "magic");
    if (rc < 0)
        goto out;
    if (memcmp(magic, "GGUF", 4) != 0) {
        rc = fail(&c, -RF_EBADMODEL, "not a GGUF file (bad magic)");
        goto out;
    }
    rc = get_u32(&c, &h.version, "version");
    if (rc == 0)
        rc = get_u64(&c, &h.n_tensors, "tensor count");
    if (rc == 0)
        rc = get_u64(&c, &h.n_kv, "key count");
    if (rc < 0)
        goto out;
    if (h.version < 2 || h.version > 3) {
        rc = fail(&c, -RF_EBADMODEL, "GGUF version %u is not supported (2 or 3)", h.version);
        goto out;
    }
    /* A key is at least 12 bytes, a tensor info at least 24: both counts are bounded by the file.
     */
    if (h.n_kv > file_bytes / 12 || h.n_tensors > file_bytes / 24) {
        rc = fail(&c, -RF_EBADMODEL,
                  "truncated or corrupt GGUF header (%llu keys and %llu tensors cannot fit in %llu "
                  "bytes)",
                  (unsigned long long)h.n_kv, (unsigned long long)h.n_tensors,
                  (unsigned long long)file_bytes);
        goto out;
    }
    for (uint64_t i = 0; i < h.n_kv; i++) {
        char key[RF_GGUF_MAX_NAME];
        uint64_t key_len;
        uint32_t type;

        rc = get_string(&c, key, sizeof(key), &key_len, "key");
        if (rc == 0)
            rc = get_u32(&c, &type, "value type");
        if (rc == 0)
            rc = read_value(&c, key_len < sizeof(key) ? key : "", type, &h.alignment_bytes);
        if (rc < 0)
            goto out;
    }

    /*
     * Two passes over the tensor infos: the data offset (the end of the
     * infos, padded) is known only after the last one, and the check
     * against the file needs it. The first pass proves each tensor's own
     * sizes and keeps the largest end; names are reported from there.
     */
    tensors_at = c.pos;
    for (uint64_t i = 0; i < h.n_tensors; i++) {
        char name[RF_GGUF_MAX_NAME];
        uint64_t end;
        rc = read_tensor(&c, i, h.alignment_bytes, name, &end);
        if (rc < 0)
            goto out;
        if (end > max_end)
            max_end = end;
    }
    h.header_bytes = c.pos;
    uint64_t pad = (h.alignment_bytes - h.header_bytes % h.alignment_bytes) % h.alignment_bytes;
    /* Without tensors there is no data section: a vocab-only file may end unpadded. */
    if (__builtin_add_overflow(h.header_bytes, pad, &h.data_offset_bytes) ||
        __builtin_add_overflow(h.data_offset_bytes, max_end, &h.data_end_bytes) ||
        (h.n_tensors > 0 && h.data_end_bytes > file_bytes)) {
        /* Name the first tensor whose data lies past the end. */
        c.pos = tensors_at;
        for (uint64_t i = 0; i < h.n_tensors; i++) {
            char name[RF_GGUF_MAX_NAME];
            uint64_t end, abs_end;
            rc = read_tensor(&c, i, h.alignment_bytes, name, &end);
            if (rc < 0)
                goto out;
            if (__builtin_add_overflow(h.data_offset_bytes, end, &abs_end) ||
                abs_end > file_bytes) {
                rc = fail(&c, -RF_EBADMODEL,
                          "tensor '%s' data lies past the end of the file (%llu bytes)", name,
                          (unsigned long long)file_bytes);
                goto out;
            }
        }
        rc = fail(&c, -RF_EBADMODEL, "data section lies past the end of the file");
        goto out;
    }
    if (info)
        *info = h;
    rc = 0;
out:
    free(c.win);
    return rc;
}

/* The read callback over a buffer: ctx points at a struct mem_file. */
struct mem_file {
    const unsigned char *buf;
    size_t bytes;
};

static long mem_read(void *ctx, uint64_t offset_bytes, void *buf, size_t len)
{
    const struct mem_file *f = ctx;

    if (offset_bytes >= f->bytes)
        return 0;
    size_t n = f->bytes - (size_t)offset_bytes < len ? f->bytes - (size_t)offset_bytes : len;
    memcpy(buf, f->buf + offset_bytes, n);
    return (long)n;
}

int rf_gguf_header_check_buffer(const void *buf, size_t bytes, struct rf_gguf_header_info *info,
                                char *err, size_t err_size)
{
    struct mem_file f = {.buf = buf, .bytes = bytes};

    if (!buf && bytes)
        return -EINVAL;
    return rf_gguf_header_check(mem_read, &f, bytes, info, err, err_size);
}
