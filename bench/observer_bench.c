/*
 * observer_bench: decode throughput with the CPU node-dispatch observer off
 * and on, measured side by side in one process.
 *
 * Loads the model once, runs one unmeasured warm-up generation each way,
 * then REPS repetitions of each, interleaved ABBA (off,on / on,off / ...)
 * so drift (page cache, frequency, neighbours) falls on both sides alike.
 * Decode tokens/s of one generation = (generated tokens - 1) / decode_ns,
 * the part after the first sampled token (forge_generate_result.decode_ns).
 * Prints each repetition, the median of each side and the ratio on/off
 * (goal: >= 0.97; also the best run of each side, for a shared host), the
 * observer's events per generation and dropped events, and whether every
 * generation produced the warm-up's tokens. Then (--page-reps, default 5
 * passes) the throughput of mincore page sampling over the model's mapping
 * in pages/s, with its page counts; bench/observer_bench.sh prints
 * fincore's on the same file beside it.
 *
 * Run (after `make build`; bench/observer_bench.sh wraps it and makes the
 * model if missing):
 *
 *     build/bench/observer_bench -m build/models/tinyllama-q8_0.gguf -n 32 -t 2 -r 5
 *
 * Exit status: 0 measured (whether or not the goal was met), 1 failure or
 * differing tokens, 2 bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/residency.h"
#include "ramforge/core/timing.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/forge/forge_pages.h"
#include "ramforge/sys/pages.h"
#include "ramforge/tools/defaults.h"

#define DEFAULT_CAPACITY 32768 /* events: ~25 MiB, a 22-layer model's 32 decodes fit */
#define MAX_REPS 101

struct bench {
    const char *model_path;
    const char *prompt;
    int32_t n_predict;
    int32_t n_threads;
    int reps;
    size_t capacity;
    struct forge_model *model;
    struct forge_observer *obs;
    int32_t *ref_tokens; /* the warm-up's tokens, n_predict slots */
    size_t ref_n;
    double off[MAX_REPS], on[MAX_REPS]; /* decode tokens/s per repetition */
    uint64_t events, dropped;           /* of the last observed generation */
    bool tokens_differ;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: observer_bench -m MODEL [-p PROMPT] [-n N] [-t THREADS] [-r REPS]\n"
            "                      [--capacity EVENTS] [--page-reps N]\n"
            "\n"
            "Decode tokens/s with the dispatch observer off and on, interleaved.\n"
            "  -m, --model PATH      GGUF model\n"
            "  -p, --prompt TEXT     prompt (default \"" RF_DEFAULT_PROMPT "\")\n"
            "  -n, --n-predict N     tokens to generate per run (default 32)\n"
            "  -t, --threads N       threads (default: llama.cpp's)\n"
            "  -r, --reps N          repetitions each way, 1..%d (default 5)\n"
            "      --capacity N      observer events (default %d)\n"
            "      --page-reps N     passes of mincore page sampling over the mapping,\n"
            "                        0..%d (default 5; 0 skips)\n"
            "  -h, --help\n",
            MAX_REPS, DEFAULT_CAPACITY, MAX_REPS);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof(double));
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* One generation; *tok_s = decode tokens/s. Observed when observe is set. */
static int run_once(struct bench *b, bool observe, double *tok_s)
{
    struct forge_generate_params gp = {
        .prompt = b->prompt,
        .n_predict = b->n_predict,
        .n_threads = b->n_threads,
        .observer = observe ? b->obs : NULL,
    };
    struct forge_generate_result r;
    char err[FORGE_ERR_MAX];

    if (observe)
        forge_observer_reset(b->obs);
    int rc = forge_generate(b->model, &gp, &r, err);
    if (rc < 0) {
        fprintf(stderr, "observer_bench: generate: %s\n", err);
        return rc;
    }
    if (r.n_tokens < 2 || r.decode_ns == 0) {
        fprintf(stderr, "observer_bench: only %zu tokens generated: nothing to time\n", r.n_tokens);
        forge_generate_result_free(&r);
        return -EINVAL;
    }
    *tok_s = (double)(r.n_tokens - 1) * 1e9 / (double)r.decode_ns;
    if (!b->ref_tokens) {
        b->ref_tokens = malloc(r.n_tokens * sizeof(int32_t));
        if (!b->ref_tokens) {
            forge_generate_result_free(&r);
            return -ENOMEM;
        }
        memcpy(b->ref_tokens, r.tokens, r.n_tokens * sizeof(int32_t));
        b->ref_n = r.n_tokens;
    } else if (r.n_tokens != b->ref_n ||
               memcmp(r.tokens, b->ref_tokens, r.n_tokens * sizeof(int32_t)) != 0) {
        b->tokens_differ = true;
    }
    if (observe) {
        struct forge_observer_stats st;
        forge_observer_stats(b->obs, &st);
        b->events = st.events;
        b->dropped = st.dropped_events;
    }
    forge_generate_result_free(&r);
    return 0;
}

/*
 * mincore sampling throughput: forge_model_sample_pages over the model's
 * whole validated mapping in RF_PAGE_WINDOW_PAGES chunks (each call
 * re-validates against /proc/self/maps, as in use), reps times; prints the
 * median pages/s and the last pass's page counts, to set beside fincore.
 */
static void bench_pages(struct bench *b, int reps)
{
    static uint8_t states[RF_PAGE_WINDOW_PAGES];
    double rate[MAX_REPS];
    uint64_t counts[3] = {0}; /* unknown, nonresident, resident (RF_PAGE_*) */
    size_t nm;
    const struct rf_mapping_meta *mm = forge_model_mappings(b->model, &nm);
    const uint64_t page = rfsys_page_bytes();

    if (nm < 1 || !mm[0].validated) {
        printf("page sampling: skipped (no validated file mapping)\n");
        return;
    }
    uint64_t first = mm[0].map_offset_bytes / page;
    uint64_t end = (mm[0].map_offset_bytes + mm[0].map_length_bytes + page - 1) / page;
    int first_error = 0;
    for (int r = 0; r < reps; r++) {
        memset(counts, 0, sizeof(counts));
        uint64_t t0 = rf_now_ns();
        for (uint64_t p = first; p < end; p += RF_PAGE_WINDOW_PAGES) {
            uint64_t n = end - p < RF_PAGE_WINDOW_PAGES ? end - p : RF_PAGE_WINDOW_PAGES;
            int rc = forge_model_sample_pages(b->model, 0, p, n, states);
            if (rc < 0 && !first_error)
                first_error = rc;
            for (uint64_t i = 0; i < n; i++)
                counts[states[i] <= RF_PAGE_RESIDENT ? states[i] : RF_PAGE_UNKNOWN]++;
        }
        uint64_t ns = rf_now_ns() - t0;
        rate[r] = (double)(end - first) * 1e9 / (double)(ns ? ns : 1);
    }
    printf(
        "page sampling (forge_model_sample_pages, mincore): %llu mapped file pages, "
        "median %.0f pages/s over %d passes; resident %llu, nonresident %llu, unknown %llu%s%s\n",
        (unsigned long long)(end - first), median(rate, reps), reps,
        (unsigned long long)counts[RF_PAGE_RESIDENT],
        (unsigned long long)counts[RF_PAGE_NONRESIDENT],
        (unsigned long long)counts[RF_PAGE_UNKNOWN], first_error ? "; first error: " : "",
        first_error ? forge_page_error_reason(first_error) : "");
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"n-predict", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"reps", required_argument, NULL, 'r'},
        {"capacity", required_argument, NULL, 'c'},
        {"page-reps", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct bench b = {
        .prompt = RF_DEFAULT_PROMPT, .n_predict = 32, .reps = 5, .capacity = DEFAULT_CAPACITY};
    char err[FORGE_ERR_MAX];
    int c, rc, status = 1, page_reps = 5;
    long v;

    while ((c = getopt_long(argc, argv, "m:p:n:t:r:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            b.model_path = optarg;
            break;
        case 'p':
            b.prompt = optarg;
            break;
        case 'n':
            if (parse_int(optarg, 2, 4096, &v) < 0)
                goto bad;
            b.n_predict = (int32_t)v;
            break;
        case 't':
            if (parse_int(optarg, 1, 1024, &v) < 0)
                goto bad;
            b.n_threads = (int32_t)v;
            break;
        case 'r':
            if (parse_int(optarg, 1, MAX_REPS, &v) < 0)
                goto bad;
            b.reps = (int)v;
            break;
        case 'c':
            if (parse_int(optarg, 1, 1L << 24, &v) < 0)
                goto bad;
            b.capacity = (size_t)v;
            break;
        case 'P':
            if (parse_int(optarg, 0, MAX_REPS, &v) < 0)
                goto bad;
            page_reps = (int)v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!b.model_path || optind != argc) {
        usage(stderr);
        return 2;
    }

    forge_init(false);
    struct forge_model_params mp = forge_model_default_params();
    rc = forge_model_load(b.model_path, &mp, &b.model, err);
    if (rc < 0) {
        fprintf(stderr, "observer_bench: %s\n", err);
        return 1;
    }
    rc = forge_observer_create(b.capacity, &b.obs);
    if (rc < 0) {
        fprintf(stderr, "observer_bench: observer: %s\n", rf_strerror(rc));
        goto out;
    }

    struct forge_model_info info;
    forge_model_get_info(b.model, &info);
    char threads[16] = "default";
    if (b.n_threads > 0)
        snprintf(threads, sizeof(threads), "%d", b.n_threads);
    printf("observer_bench: %s (%s), %d tokens, threads %s, %d repetitions each way, "
           "interleaved ABBA\n",
           b.model_path, info.desc, b.n_predict, threads, b.reps);

    double warm;
    if (run_once(&b, false, &warm) < 0 || run_once(&b, true, &warm) < 0)
        goto out;
    printf("  rep   off tok/s    on tok/s\n");
    for (int i = 0; i < b.reps; i++) {
        bool on_first = i % 2; /* ABBA: off,on then on,off */
        for (int k = 0; k < 2; k++) {
            bool observe = (k == 0) == on_first;
            if (run_once(&b, observe, observe ? &b.on[i] : &b.off[i]) < 0)
                goto out;
        }
        printf("  %3d  %10.3f  %10.3f\n", i + 1, b.off[i], b.on[i]);
    }
    double m_off = median(b.off, b.reps), m_on = median(b.on, b.reps);
    double ratio = m_on / m_off;
    printf("median decode tokens/s: off %.3f, on %.3f; ratio on/off %.4f (goal >= 0.97: %s)\n",
           m_off, m_on, ratio, ratio >= 0.97 ? "met" : "missed");
    /* The best run of each side: the least disturbed by other load on a shared host. */
    double best_off = b.off[0], best_on = b.on[0];
    for (int i = 1; i < b.reps; i++) {
        best_off = b.off[i] > best_off ? b.off[i] : best_off;
        best_on = b.on[i] > best_on ? b.on[i] : best_on;
    }
    printf("best decode tokens/s: off %.3f, on %.3f; ratio on/off %.4f\n", best_off, best_on,
           best_on / best_off);
    printf("observer: %llu events per generation, %llu dropped, capacity %zu events "
           "(%zu bytes each)\n",
           (unsigned long long)b.events, (unsigned long long)b.dropped, b.capacity,
           sizeof(struct rf_dispatch_event));
    printf("tokens identical off/on: %s\n", b.tokens_differ ? "no" : "yes");
    if (page_reps > 0)
        bench_pages(&b, page_reps);
    status = b.tokens_differ ? 1 : 0;
out:
    forge_observer_free(b.obs);
    forge_model_free(b.model);
    free(b.ref_tokens);
    return status;
bad:
    fprintf(stderr, "observer_bench: bad option value '%s'\n", optarg);
    usage(stderr);
    return 2;
}
