/*
 * rf_gguf_header_check through its read callback: the figures of a header
 * laid out by hand (offsets counted here, not taken from the code), a file
 * one byte short, read errors and a file that shrinks while read, and a
 * header larger than the 64 KiB window (a long string value), read in
 * increasing offsets with no call above 64 KiB. The hostile shapes and
 * sizes are tests/e2e/test_gguf_hostile.py; random inputs tests/fuzz.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ramforge/core/gguf_header.h"
#include "ramforge/error.h"

/* A little-endian byte writer. */
struct buf {
    unsigned char *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v)
{
    unsigned char x[4] = {v, v >> 8, v >> 16, v >> 24};
    put(b, x, 4);
}

static void put_u64(struct buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(struct buf *b, const char *s, size_t n)
{
    put_u64(b, n);
    put(b, s, n);
}

/* "GGUF" v3, n_tensors, n_kv: 24 bytes. */
static void put_head(struct buf *b, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

/* One 1-d f32 tensor info: 8 + name + 4 + 8 + 4 + 8 bytes. */
static void put_f32_tensor(struct buf *b, const char *name, uint64_t ne0, uint64_t offset)
{
    put_str(b, name, strlen(name));
    put_u32(b, 1);
    put_u64(b, ne0);
    put_u32(b, 0); /* f32 */
    put_u64(b, offset);
}

static void put_zeros(struct buf *b, size_t n)
{
    unsigned char z[256] = {0};
    while (n > 0) {
        size_t k = n < sizeof(z) ? n : sizeof(z);
        put(b, z, k);
        n -= k;
    }
}

static void test_figures_by_hand(void **state)
{
    (void)state;
    struct buf b = {0};
    struct rf_gguf_header_info info;
    char err[256];

    put_head(&b, 1, 0);             /* 24 bytes */
    put_f32_tensor(&b, "a", 8, 0);  /* 8 + 1 + 4 + 8 + 4 + 8 = 33: header ends at 57 */
    put_zeros(&b, 64 - 57 + 8 * 4); /* padding to 64, then 32 bytes of data */
    assert_int_equal(b.n, 96);
    assert_int_equal(rf_gguf_header_check_buffer(b.p, b.n, &info, err, sizeof(err)), 0);
    assert_int_equal(info.version, 3);
    assert_int_equal(info.n_tensors, 1);
    assert_int_equal(info.alignment_bytes, 32);
    assert_int_equal(info.header_bytes, 57);
    assert_int_equal(info.data_offset_bytes, 64);
    assert_int_equal(info.data_end_bytes, 96);

    /* One byte short: the tensor's data passes the end, by name. */
    assert_int_equal(rf_gguf_header_check_buffer(b.p, b.n - 1, &info, err, sizeof(err)),
                     -RF_EBADMODEL);
    assert_non_null(strstr(err, "tensor 'a' data lies past the end of the file (95 bytes)"));
    free(b.p);
}

/* A file of `size` bytes whose reads fail at fail_at, or that shrinks to shrink_to. */
struct fake_file {
    const unsigned char *p;
    uint64_t size;
    uint64_t fail_at, shrink_to; /* UINT64_MAX: never */
    uint64_t last_offset;
    size_t max_len, calls, total;
    int ordered; /* 1 while offsets increased */
};

static long fake_read(void *ctx, uint64_t off, void *buf, size_t len)
{
    struct fake_file *f = ctx;
    f->calls++;
    f->total += len;
    if (len > f->max_len)
        f->max_len = len;
    if (f->calls > 1 && off <= f->last_offset)
        f->ordered = 0;
    f->last_offset = off;
    if (off + len > f->fail_at)
        return -EIO;
    uint64_t end = f->size < f->shrink_to ? f->size : f->shrink_to;
    if (off >= end)
        return 0;
    size_t n = end - off < len ? (size_t)(end - off) : len;
    memcpy(buf, f->p + off, n);
    return (long)n;
}

static void test_read_errors(void **state)
{
    (void)state;
    struct buf b = {0};
    char err[256];

    put_head(&b, 1, 0);
    put_f32_tensor(&b, "a", 8, 0);
    put_zeros(&b, 64 - 57 + 32);
    struct fake_file f = {.p = b.p, .size = b.n, .fail_at = 0, .shrink_to = UINT64_MAX};
    assert_int_equal(rf_gguf_header_check(fake_read, &f, b.n, NULL, err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "read error at byte 0"));

    /* The file is 96 bytes at stat time and 20 when read. */
    f = (struct fake_file){.p = b.p, .size = b.n, .fail_at = UINT64_MAX, .shrink_to = 20};
    assert_int_equal(rf_gguf_header_check(fake_read, &f, b.n, NULL, err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "short read at byte 20"));

    assert_int_equal(rf_gguf_header_check(NULL, &f, b.n, NULL, err, sizeof(err)), -EINVAL);
    free(b.p);
}

static void test_header_past_window(void **state)
{
    (void)state;
    struct buf b = {0};
    struct rf_gguf_header_info info;
    char err[256];
    const size_t long_bytes = 200000; /* three windows and a bit */
    char *s = malloc(long_bytes);
    assert_non_null(s);
    memset(s, 'x', long_bytes);

    put_head(&b, 2, 2);
    put_str(&b, "general.name", 12);
    put_u32(&b, 8); /* string */
    put_str(&b, s, long_bytes);
    put_str(&b, "general.alignment", 17);
    put_u32(&b, 4); /* u32 */
    put_u32(&b, 64);
    put_f32_tensor(&b, "first", 16, 0);
    put_f32_tensor(&b, "second", 16, 64);
    size_t header = b.n;
    size_t data_offset = (header + 63) / 64 * 64;
    put_zeros(&b, data_offset - header + 64 + 16 * 4);

    struct fake_file f = {
        .p = b.p, .size = b.n, .fail_at = UINT64_MAX, .shrink_to = UINT64_MAX, .ordered = 1};
    assert_int_equal(rf_gguf_header_check(fake_read, &f, b.n, &info, err, sizeof(err)), 0);
    assert_int_equal(info.alignment_bytes, 64);
    assert_int_equal(info.header_bytes, header);
    assert_int_equal(info.data_offset_bytes, data_offset);
    assert_int_equal(info.data_end_bytes, b.n);
    assert_true(f.max_len <= 64 * 1024);
    assert_true(f.ordered);
    assert_true(f.total < long_bytes); /* most of the long value was skipped, not read */
    free(s);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_by_hand),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_header_past_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
