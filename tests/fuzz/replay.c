/*
 * The corpus replay: a harness's LLVMFuzzerTestOneInput as a plain
 * program (no clang, no libFuzzer), fed every file of the directories and
 * files given on the command line. ctest runs it over
 * tests/fuzz/corpus/<harness>/, so each crash `make fuzz` found (and that
 * was added there) stays a regression test. A harness signals a failed
 * property with abort(); a missing or empty corpus fails too, so the test
 * cannot pass by reading nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs above this are not replayed: libFuzzer's -max_len in `make fuzz`. */
#define REPLAY_MAX_BYTES (1u << 20)

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = malloc(REPLAY_MAX_BYTES);
    size_t n = buf ? fread(buf, 1, REPLAY_MAX_BYTES, f) : 0;
    int bad = !buf || ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: cannot read %s (or larger than %u bytes)\n", path,
                REPLAY_MAX_BYTES);
        free(buf);
        return -1;
    }
    /* a copy of exactly n bytes, so that reading past the input is caught by ASan builds */
    uint8_t *in = malloc(n ? n : 1);
    if (!in)
        abort();
    memcpy(in, buf, n);
    free(buf);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    size_t replayed = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) < 0)
                return 1;
            replayed++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, by_name);
        if (n < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
            if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                if (replay_file(path) < 0)
                    return 1;
                replayed++;
            }
            free(names[k]);
        }
        free(names);
    }
    if (replayed == 0) {
        fprintf(stderr, "replay: no input given or found\n");
        return 1;
    }
    printf("replay: %zu inputs, no failure\n", replayed);
    return 0;
}
