/*
 * ELF facts (ramforge/sys/elf_info.h): the build ID note parsed from crafted
 * note segments (found, another note type or owner, a descriptor running
 * past the segment, an output too small), the loaded object holding an
 * address, and the inspection of program files (this test itself, a file
 * that is not ELF, a missing one).
 */
#include <errno.h>
#include <gnu/libc-version.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ramforge/sys/elf_info.h"

/* A note: 12-byte header, name padded to 4, descriptor padded to 4. */
static size_t note(unsigned char *p, uint32_t type, const char *name, const unsigned char *desc,
                   uint32_t descsz)
{
    uint32_t namesz = (uint32_t)strlen(name) + 1;
    memcpy(p, &namesz, 4);
    memcpy(p + 4, &descsz, 4);
    memcpy(p + 8, &type, 4);
    memset(p + 12, 0, 64);
    memcpy(p + 12, name, namesz);
    size_t at = 12 + ((namesz + 3) & ~3u);
    memcpy(p + at, desc, descsz);
    return at + ((descsz + 3) & ~3u);
}

static void test_build_id_note(void **state)
{
    (void)state;
    unsigned char seg[256], id[4] = {0xde, 0xad, 0xbe, 0xef};
    char out[RFSYS_BUILD_ID_MAX];
    size_t n = note(seg, 1 /* NT_VERSION */, "GNU", id, 4);
    n += note(seg + n, 3 /* NT_GNU_BUILD_ID */, "XYZ", id, 4); /* another owner */
    size_t whole = n + note(seg + n, 3, "GNU", id, 4);
    assert_true(rfsys_build_id_note(seg, seg + whole, out, sizeof(out)));
    assert_string_equal(out, "deadbeef");
    assert_false(rfsys_build_id_note(seg, seg + n, out, sizeof(out)));         /* none of ours */
    assert_false(rfsys_build_id_note(seg, seg + whole - 4, out, sizeof(out))); /* cut */
    assert_false(rfsys_build_id_note(seg, seg + whole, out, 8)); /* 8 hex + NUL do not fit */
}

static void test_build_id_at(void **state)
{
    (void)state;
    char path[512], id[RFSYS_BUILD_ID_MAX];
    /* libc holds gnu_get_libc_version (no sanitizer intercepts it, as ASan does snprintf)
       and carries a build ID on Debian. */
    int rc =
        rfsys_build_id_at((const void *)&gnu_get_libc_version, path, sizeof(path), id, sizeof(id));
    assert_int_equal(rc, 0);
    assert_non_null(strstr(path, "libc"));
    assert_true(strlen(id) >= 16);
    assert_int_equal(rfsys_build_id_at((const void *)8, path, sizeof(path), id, sizeof(id)),
                     -ENOENT);
    assert_int_equal(rfsys_build_id_at(NULL, path, sizeof(path), id, sizeof(id)), -EINVAL);
}

static void test_inspect(void **state)
{
    (void)state;
    struct rfsys_elf_info info;
    assert_int_equal(rfsys_elf_inspect("/proc/self/exe", "test_inspect", &info), 0);
    assert_true(info.dynamic);
    assert_true(info.interp[0] == '/');
    assert_true(info.defines_symbol); /* this test's own function (.symtab) */
    assert_int_equal(rfsys_elf_inspect("/proc/self/exe", "no_such_symbol_here", &info), 0);
    assert_false(info.defines_symbol);
    assert_int_equal(rfsys_elf_inspect(__FILE__, NULL, &info), -ENOEXEC);
    assert_int_equal(rfsys_elf_inspect("/nonexistent/program", NULL, &info), -ENOENT);
    assert_int_equal(rfsys_elf_inspect(NULL, NULL, &info), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_id_note),
        cmocka_unit_test(test_build_id_at),
        cmocka_unit_test(test_inspect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
