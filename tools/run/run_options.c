/*
 * ramforge run's command line: the options, their checks and warnings about options the chosen
 * policy does not use, the usage text, and the early check of the JSON report path.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "ramforge/core/intervals.h"
#include "ramforge/core/policy.h"
#include "ramforge/tools/defaults.h"
#include "run.h"

static void usage(FILE *out)
{
    char wrapped[1024]; /* RF_SIZE_RULE, wrapped */
    fprintf(out,
            "Usage: %s run -m MODEL [-p PROMPT] [-n N] [OPTIONS]\n"
            "\n"
            "Load MODEL through llama.cpp (mmap), generate N tokens greedily (the decode\n"
            "loop of llama.cpp's examples/simple), print the generated text on stdout and,\n"
            "after it on stderr (as time(1) does), the summary: where the memory went, the\n"
            "limit, decode tok/s, time to first token and the thread count. With a\n"
            "mutating policy, release cold weight pages at safe boundaries (after load,\n"
            "after the session is dropped).\n"
            "\n"
            "Options:\n"
            "  -m, --model PATH              GGUF model (required)\n"
            "  -p, --prompt TEXT             prompt (default \"" RF_DEFAULT_PROMPT "\")\n"
            "  -f, --file FILE               read the prompt from FILE ('-': standard input),\n"
            "                                one trailing newline dropped, as llama.cpp's -f\n"
            "  -n, --n-predict N             tokens to generate, 1..1000000 (default 32)\n"
            "  -t, --threads N               threads, 1..1024 (default: the physical cores,\n"
            "                                as llama.cpp's tools)\n"
            "  -c, --ctx-size N              context size in tokens, 1..16777216 (default:\n"
            "                                prompt + N); llama.cpp pads it to a multiple of\n"
            "                                256 cells (the report's context line)\n"
            "  -s, --seed N                  recorded in the report; greedy decoding does not\n"
            "                                use it (default 0)\n"
            "      --residency-policy P      off           no inventory, ledger or plan\n"
            "                                observe       inventory, ledger, reconciliation and\n"
            "                                              (with a target) a plan; changes\n"
            "                                              nothing (default)\n"
            "                                conservative  release only tensors that share no\n"
            "                                              page with another; without a target\n"
            "                                              only such repacked weights' file pages\n"
            "                                memory-bound  repacked weights' file pages, then\n"
            "                                              the largest tensors, until the\n"
            "                                              mapping fits the soft target\n"
            "                                reuse-aware   as memory-bound, ordered by the access\n"
            "                                              profile of a complete\n"
            "                                              --observe-dispatch trace; without\n"
            "                                              one the plan says profile_used=false\n"
            "                                active        alias of memory-bound\n"
            "                                streaming     for a model over the memory limit:\n"
            "                                              pin (mlock) the output tensors and\n"
            "                                              the layers that fit, read the rest\n"
            "                                              ahead; never releases; a refused\n"
            "                                              mlock falls back with a warning;\n"
            "                                              on a MoE model the routed experts\n"
            "                                              go to an LRU expert cache instead\n"
            "                                              (docs/MOE.md)\n"
            "      --stream-window SIZE      with streaming, the page cache left for the\n"
            "                                streamed layers, without the read-ahead (default:\n"
            "                                the largest layer, at least 32 MiB)\n"
            "      --no-stream-sequential    with streaming, do not madvise(MADV_SEQUENTIAL) the\n"
            "                                streamed layers while pinned (default: do, they\n"
            "                                are read once per token)\n"
            "      --no-stream-hugepage      with streaming, do not madvise(MADV_HUGEPAGE) the\n"
            "                                streamed layers while pinned (default: do; 2 MiB\n"
            "                                folios halve the decode time under a limit)\n"
            "      --stream-prefetch-layers N\n"
            "                                with streaming, a helper thread fadvises layer\n"
            "                                L + N - 1 WILLNEED when the decode reaches L,\n"
            "                                0..4 (default 0: off; measured slower)\n"
            "      --no-stream-prefetch      same as --stream-prefetch-layers 0 (the default)\n"
            "      --stream-read-ahead N     with streaming, threads read the streamed tensors\n"
            "                                ahead of the decode, in the prompt's order (pread,\n"
            "                                O_DIRECT where the filesystem allows it), into a\n"
            "                                ring of N times the largest tensor, the window the\n"
            "                                decode computes from; 2..8, 0: off, and a MoE\n"
            "                                model's expert cache with it (default 4; off\n"
            "                                with --stream-window or --stream-prefetch-layers)\n"
            "      --stream-spin-wait        with streaming, leave ggml's threads spinning at\n"
            "                                their barriers (libgomp's default); without it,\n"
            "                                when the file exceeds the memory limit, run runs\n"
            "                                itself again with OMP_WAIT_POLICY=PASSIVE and\n"
            "                                GOMP_SPINCOUNT=300 unless the policy is set\n"
            "                                (with -f -, set them yourself)\n"
            "      --memory-limit SIZE       run in a fresh child memory cgroup of this\n"
            "                                command's own with that hard limit (cgroup v1\n"
            "                                or v2; root or a delegated cgroup): a cap the\n"
            "                                kernel holds, not a figure; removed at exit,\n"
            "                                also on SIGINT/SIGTERM/SIGHUP (processes left\n"
            "                                in it: SIGTERM, SIGKILL 5 s later); a killed\n"
            "                                run's JSON report is then written by this command\n"
            "      --memory-target SIZE      memory target (required by memory-bound and\n"
            "                                active). The plan brings the model mapping's\n"
            "                                resident bytes under target - reserve; admission\n"
            "                                compares the run's projected memory (RSS + KV\n"
            "                                cache) with it and warns (a target, not a cap)\n"
            "      --safety-reserve SIZE     taken off the target: soft target = target -\n"
            "                                reserve (default 0)\n"
            "      --release-mode MODE       dontneed (MADV_DONTNEED: drops the mapping's RSS,\n"
            "                                the page cache stays) or pageout (MADV_PAGEOUT:\n"
            "                                reclaims the pages); default dontneed\n"
            "      --access-probe            classify the weights by a one-token decode graph\n"
            "                                (costs about one token's time) instead of by\n"
            "                                where llama.cpp placed them; default for the\n"
            "                                policies that release\n"
            "      --sample-smaps            read smaps (Rss and Pss; walks every page) at every\n"
            "                                sample, not only the ledger's (default: the\n"
            "                                others count resident pages with PAGEMAP_SCAN)\n"
            "      --admission MODE          warn (default): report, and refuse (exit 1) only\n"
            "                                a run whose projected charge exceeds a cgroup hard\n"
            "                                limit (the kernel would kill it); enforce: also\n"
            "                                refuse an unknown outcome and a run that would\n"
            "                                thrash; off: never refuse. Every limit from the\n"
            "                                process's cgroup up to the root is checked;\n"
            "                                reclaimable: clean unmapped page cache, and after\n"
            "                                the load the model mapping's own unlocked resident\n"
            "                                pages (smaps Rss - Locked), under every policy\n"
            "      --dead-file-pages WHAT    release (default) or keep: with a mutating policy,\n"
            "                                release, whatever the target, the file pages of\n"
            "                                weights the graph reads from a repacked anonymous\n"
            "                                copy (never read again): each as soon as the load\n"
            "                                copied it (a lower load peak), the rest after load\n"
            "      --verify-session          after the release, run the prompt again and\n"
            "                                compare the tokens (pages re-fault from the file)\n"
            "      --residency-page-budget N at the end of the run, sample at most N pages of\n"
            "                                the model mapping with mincore (the plan's\n"
            "                                selection first); pages past the budget are\n"
            "                                unknown, never nonresident (default 1048576;\n"
            "                                0: no sampling)\n"
            "      --staging-budget SIZE     before the session, prefetch (MADV_WILLNEED, bounded\n"
            "                                chunks) the page ranges of the weights the graph\n"
            "                                reads, in file order, deduplicated, at most SIZE\n"
            "                                bytes; reports selected, accepted and the observed\n"
            "                                page-cache change (llama.cpp's load already\n"
            "                                prefetches: after a plain load it changes little)\n"
            "      --observe-dispatch        record one event per compute node of the session's\n"
            "                                graph before its kernel runs (cb_eval ask phase:\n"
            "                                no data read, no barrier added); attributes the\n"
            "                                weights it names; gives reuse-aware its access\n"
            "                                profile. Dispatch-start evidence only\n"
            "      --dispatch-events N       observer buffer, events (about 0.8 KiB each;\n"
            "                                default 32768); more are counted as dropped\n"
            "      --dispatch-sample-pages N with --observe-dispatch, sample with mincore up to\n"
            "                                N pages (1..4096) of each weight source before\n"
            "                                dispatch (point-in-time; default 0: off)\n"
            "      --profile PATH            persisted access profile: read at start (another\n"
            "                                model's, another version's or a corrupt file is\n"
            "                                ignored with the reason and never overwritten);\n"
            "                                orders reuse-aware's release (cold first) and\n"
            "                                staging (hot first); updated by a complete\n"
            "                                --observe-dispatch trace and the operation's\n"
            "                                prediction, and saved atomically at the end\n"
            "      --profile-history N       prediction history entries the profile keeps\n"
            "                                (1..4096, default 32)\n"
            "  -q, --quiet                   no summary on stderr: the generated text only\n"
            "      --residency-report        after the summary, the details (ledger, plan,\n"
            "                                releases, timing, every warning) on stderr\n"
            "      --residency-report-json PATH\n"
            "                                write the JSON operation report (schema_version 1)\n"
            "                                to PATH (temporary file + rename: never partial);\n"
            "                                '-': to standard output, which then holds only\n"
            "                                the report (the generated text goes to stderr)\n"
            "      --metrics-file PATH       write the operation's ledger, last sample,\n"
            "                                admission, staging, releases and speed as\n"
            "                                Prometheus text (serve's /metrics names; labels\n"
            "                                model, the file's name, and path, its canonical\n"
            "                                path) for node_exporter's textfile collector\n"
            "                                (temporary file + rename: never partial)\n"
            "      --residency-svg PATH      draw page-cache residency (mincore) as SVG: rows\n"
            "                                of layers, columns of tensor kinds, a panel per\n"
            "                                boundary (after load, end of session, end of run)\n"
            "      --no-repack               load without llama.cpp's extra buffer types\n"
            "                                (use_extra_bufts false: no CPU_REPACK copies of\n"
            "                                Q4_0 weights; less memory, slower decode)\n"
            "      --mlock                   lock the model mapping (release is then refused\n"
            "                                by the kernel and reported as ReleaseFailed)\n"
            "      --hold                    after the report, keep the model loaded until\n"
            "                                standard input closes (compare with\n"
            "                                /proc/PID/smaps, fincore, vmtouch); streaming's\n"
            "                                pins are already undone by then\n"
            "  -v, --verbose                 show llama.cpp's log\n"
            "  -h, --help                    show this help\n"
            "\n"
            "%s\n"
            "\n"
            "Figures carry their provenance: exact_measured (read from /proc or the cgroup),\n"
            "native_logical (sizes from the GGUF table or llama.cpp: not residency),\n"
            "requested and native_accepted (bytes submitted to and accepted by madvise: not\n"
            "reclamation), estimated, or unknown (null, with the reason). They are never\n"
            "added into one total. Admission: see --admission; exceeding only the soft\n"
            "target or memory.high is a warning. docs/guide/admission.md.\n"
            "docs/guide/report.md explains every ledger category.\n",
            RF_PROGRAM, cli_wrap(RF_SIZE_RULE, wrapped, sizeof(wrapped)));
}

/* run's own long-only options (the shared ones: session_options.h). */
enum {
    OPT_VERIFY = SESSION_OPT_END,
    OPT_REPORT,
    OPT_NO_REPACK,
    OPT_MLOCK,
    OPT_HOLD,
    OPT_PAGE_BUDGET,
    OPT_OBSERVE_DISPATCH,
    OPT_DISPATCH_EVENTS,
    OPT_DISPATCH_SAMPLE_PAGES,
    OPT_DEAD_FILE_PAGES,
    OPT_ADMISSION,
    OPT_ACCESS_PROBE,
    OPT_SAMPLE_SMAPS,
    OPT_METRICS_FILE,
    OPT_RESIDENCY_SVG,
    OPT_STREAM_WINDOW,
    OPT_STREAM_SEQUENTIAL,
    OPT_STREAM_HUGEPAGE,
    OPT_STREAM_PREFETCH,
    OPT_NO_STREAM_PREFETCH,
    OPT_STREAM_READ_AHEAD,
    OPT_STREAM_SPIN_WAIT,
};

#define PROMPT_FILE_MAX (16u << 20) /* the largest prompt file -f reads, bytes */

/* The text of -f FILE ('-': standard input), one trailing newline dropped as llama.cpp's -f does;
   NULL after printing the error (unreadable, a NUL byte, larger than PROMPT_FILE_MAX). It lives
   until the process exits (options hold borrowed strings, argv's or this one). */
static const char *read_prompt_file(const char *path)
{
    static char *text;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    size_t len = 0;

    if (!f) {
        cli_error("cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    free(text);
    text = malloc(PROMPT_FILE_MAX + 1);
    if (!text) {
        cli_error("out of memory");
        goto fail;
    }
    len = fread(text, 1, PROMPT_FILE_MAX + 1, f);
    if (ferror(f)) {
        cli_error("cannot read %s: %s", path, strerror(errno));
        goto fail;
    }
    if (len > PROMPT_FILE_MAX) {
        cli_error("cannot read %s: larger than 16 MiB", path);
        goto fail;
    }
    if (memchr(text, '\0', len)) {
        cli_error("cannot read %s: it holds a NUL byte (not a text prompt)", path);
        goto fail;
    }
    if (len > 0 && text[len - 1] == '\n')
        len--;
    text[len] = '\0';
    char *fit = realloc(text, len + 1);
    if (fit)
        text = fit;
    if (f != stdin)
        fclose(f);
    return text;
fail:
    if (f != stdin)
        fclose(f);
    free(text);
    text = NULL;
    return NULL;
}

/* What parsing run's own options keeps besides run_options. */
struct run_parse {
    struct run_options *o;
    const char *prompt_file; /* -f FILE */
    bool prompt_given;       /* -p TEXT */
};

/* run's own options (session_command.own): 0, the exit status, or -1 for an unknown code. */
static int run_option(int c, const char *arg, void *ud)
{
    struct run_parse *rp = ud;
    struct run_options *o = rp->o;

    switch (c) {
    case 'p':
        o->prompt = arg;
        rp->prompt_given = true;
        break;
    case 'f':
        rp->prompt_file = arg;
        break;
    case 's':
        if (!cli_parse_int("seed (-s)", arg, 0, UINT32_MAX, &o->seed))
            return RF_EXIT_USAGE;
        break;
    case OPT_VERIFY:
        o->verify = true;
        break;
    case OPT_ACCESS_PROBE:
        o->access_probe = true;
        break;
    case OPT_SAMPLE_SMAPS:
        o->sample_smaps = true;
        break;
    case OPT_ADMISSION:
        if (rf_admission_mode_parse(arg, &o->admission) < 0) {
            cli_usage_error("unknown --admission '%s' (expected enforce, warn or off)", arg);
            return RF_EXIT_USAGE;
        }
        break;
    case OPT_DEAD_FILE_PAGES:
        if (!strcmp(arg, "release") || !strcmp(arg, "keep")) {
            o->release_dead_file_pages = !strcmp(arg, "release");
        } else {
            cli_usage_error("unknown --dead-file-pages '%s' (expected release or keep)", arg);
            return RF_EXIT_USAGE;
        }
        break;
    case OPT_REPORT:
        o->human_report = true;
        break;
    case OPT_METRICS_FILE:
        o->metrics_path = arg;
        break;
    case OPT_RESIDENCY_SVG:
        o->svg_path = arg;
        break;
    case OPT_NO_REPACK:
        o->repack = false;
        break;
    case OPT_MLOCK:
        o->mlock = true;
        break;
    case OPT_HOLD:
        o->hold = true;
        break;
    case OPT_STREAM_SEQUENTIAL:
        o->stream_sequential = false;
        break;
    case OPT_STREAM_HUGEPAGE:
        o->stream_hugepage = false;
        break;
    case OPT_STREAM_PREFETCH:
        if (!cli_parse_int("layer count (--stream-prefetch-layers)", arg, 0, 4,
                           &o->stream_prefetch))
            return RF_EXIT_USAGE;
        break;
    case OPT_NO_STREAM_PREFETCH:
        o->stream_prefetch = 0;
        break;
    case OPT_STREAM_SPIN_WAIT:
        o->stream_spin_wait = true;
        break;
    case OPT_STREAM_READ_AHEAD:
        if (!cli_parse_int("slot count (--stream-read-ahead)", arg, 0, 8, &o->stream_read_ahead))
            return RF_EXIT_USAGE;
        o->stream_read_ahead_set = true;
        if (o->stream_read_ahead == 1) {
            cli_usage_error("--stream-read-ahead 1: a ring of one cannot read ahead (the "
                            "tensor computing holds it): 0 (off) or 2..8");
            return RF_EXIT_USAGE;
        }
        break;
    case OPT_STREAM_WINDOW:
        if (!cli_parse_size("--stream-window", arg, false, &o->stream_window))
            return RF_EXIT_USAGE;
        break;
    case OPT_OBSERVE_DISPATCH:
        o->observe_dispatch = true;
        break;
    case OPT_DISPATCH_EVENTS:
        if (!cli_parse_int("event count (--dispatch-events)", arg, 1, 16777216,
                           &o->dispatch_events))
            return RF_EXIT_USAGE;
        o->has_dispatch_events = true;
        break;
    case OPT_DISPATCH_SAMPLE_PAGES:
        if (!cli_parse_int("pages per source (--dispatch-sample-pages)", arg, 0,
                           RF_PAGE_WINDOW_PAGES, &o->dispatch_sample_pages))
            return RF_EXIT_USAGE;
        o->has_dispatch_sample_pages = true;
        break;
    case OPT_PAGE_BUDGET:
        if (!cli_parse_int("page budget (--residency-page-budget)", arg, 0, INT64_MAX,
                           &o->page_budget))
            return RF_EXIT_USAGE;
        break;
    default:
        return -1;
    }
    return 0;
}

/* Returns -1 to continue, or the exit status. */
int run_parse_options(int argc, char **argv, struct run_options *o)
{
    static const struct option opts[] = {
        SESSION_LONGOPT_MODEL,
        {"prompt", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'f'},
        SESSION_LONGOPT_N_PREDICT,
        SESSION_LONGOPT_THREADS,
        SESSION_LONGOPT_CTX_SIZE,
        {"seed", required_argument, NULL, 's'},
        SESSION_LONGOPT_POLICY,
        SESSION_LONGOPT_TARGET,
        SESSION_LONGOPT_RESERVE,
        SESSION_LONGOPT_RELEASE_MODE,
        {"verify-session", no_argument, NULL, OPT_VERIFY},
        {"residency-report", no_argument, NULL, OPT_REPORT},
        SESSION_LONGOPT_QUIET,
        SESSION_LONGOPT_MEMORY_LIMIT,
        SESSION_LONGOPT_REPORT_JSON,
        {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
        {"residency-svg", required_argument, NULL, OPT_RESIDENCY_SVG},
        SESSION_LONGOPT_PROFILE,
        SESSION_LONGOPT_PROFILE_HISTORY,
        {"no-repack", no_argument, NULL, OPT_NO_REPACK},
        {"mlock", no_argument, NULL, OPT_MLOCK},
        {"hold", no_argument, NULL, OPT_HOLD},
        {"residency-page-budget", required_argument, NULL, OPT_PAGE_BUDGET},
        {"observe-dispatch", no_argument, NULL, OPT_OBSERVE_DISPATCH},
        SESSION_LONGOPT_STAGING,
        {"dispatch-events", required_argument, NULL, OPT_DISPATCH_EVENTS},
        {"dispatch-sample-pages", required_argument, NULL, OPT_DISPATCH_SAMPLE_PAGES},
        {"dead-file-pages", required_argument, NULL, OPT_DEAD_FILE_PAGES},
        {"admission", required_argument, NULL, OPT_ADMISSION},
        {"access-probe", no_argument, NULL, OPT_ACCESS_PROBE},
        {"sample-smaps", no_argument, NULL, OPT_SAMPLE_SMAPS},
        {"stream-window", required_argument, NULL, OPT_STREAM_WINDOW},
        {"no-stream-sequential", no_argument, NULL, OPT_STREAM_SEQUENTIAL},
        {"no-stream-hugepage", no_argument, NULL, OPT_STREAM_HUGEPAGE},
        {"stream-prefetch-layers", required_argument, NULL, OPT_STREAM_PREFETCH},
        {"no-stream-prefetch", no_argument, NULL, OPT_NO_STREAM_PREFETCH},
        {"stream-read-ahead", required_argument, NULL, OPT_STREAM_READ_AHEAD},
        {"stream-spin-wait", no_argument, NULL, OPT_STREAM_SPIN_WAIT},
        SESSION_LONGOPT_VERBOSE,
        SESSION_LONGOPT_HELP,
        {NULL, 0, NULL, 0},
    };
    struct run_parse rp = {.o = o};
    const struct session_command cmd = {.longopts = opts,
                                        .shortopts = ":" SESSION_SHORTOPTS "p:f:s:",
                                        .usage = usage,
                                        .own = run_option,
                                        .ud = &rp};
    const struct session_options *so = &o->sess;

    int rc = session_options_parse(&cmd, argc, argv, &o->sess);
    if (rc >= 0)
        return rc;
    if (so->quiet && o->human_report) {
        cli_usage_error("-q/--quiet and --residency-report contradict each other: use one");
        return RF_EXIT_USAGE;
    }
    if (rp.prompt_file && rp.prompt_given) {
        cli_usage_error("-p/--prompt and -f/--file both give the prompt: use one");
        return RF_EXIT_USAGE;
    }
    o->prompt_from_stdin = rp.prompt_file && strcmp(rp.prompt_file, "-") == 0;
    if (rp.prompt_file && !(o->prompt = read_prompt_file(rp.prompt_file)))
        return RF_EXIT_FAILURE;
    if (!*o->prompt) {
        cli_usage_error("the prompt is empty");
        return RF_EXIT_USAGE;
    }
    if (!cli_check_target(so->policy, so->has_target, so->target_bytes, so->reserve_bytes))
        return RF_EXIT_USAGE;
    if (o->svg_path && so->policy == RF_POLICY_OFF) {
        cli_usage_error("--residency-svg needs a residency policy (not off): it draws "
                        "the inventory's page snapshots");
        return RF_EXIT_USAGE;
    }
    if (so->profile_path && so->policy == RF_POLICY_OFF) {
        cli_usage_error("--profile needs a residency policy (not off): the profile is "
                        "matched to the model's inventory");
        return RF_EXIT_USAGE;
    }
    if (!o->stream_read_ahead_set && (o->stream_window || o->stream_prefetch > 0))
        o->stream_read_ahead = 0; /* the page-cache window asked for: no ring */
    if (o->stream_read_ahead && (o->stream_window || o->stream_prefetch > 0)) {
        cli_usage_error("--stream-read-ahead with %s: the read-ahead's ring is the window, and "
                        "its reads are the prefetch",
                        o->stream_window ? "--stream-window" : "--stream-prefetch-layers");
        return RF_EXIT_USAGE;
    }
    if (so->has_staging && so->policy == RF_POLICY_OFF)
        cli_error("warning: --staging-budget has no effect with --residency-policy off (staging "
                  "plans over the inventory)");
    session_options_warn_release_mode(so);
    if (so->policy == RF_POLICY_REUSE_AWARE && !so->has_target)
        cli_error("warning: --residency-policy reuse-aware without --memory-target selects "
                  "nothing");
    return -1;
}

bool run_json_to_stdout(const struct run_options *o)
{
    return o->sess.json_path && strcmp(o->sess.json_path, "-") == 0;
}

int run_put_json(const char *text)
{
    errno = 0;
    if (fputs(text, stdout) < 0 || fputc('\n', stdout) == EOF || cli_flush_stdout() != 0)
        return errno ? -errno : -EIO;
    return 0;
}

/* Fails early, before inference, when the report cannot be written: the path names no regular
   file (a directory, a device, a FIFO, a symlink: the report is renamed into place and would
   replace it), the model itself, or its directory is not writable. */
bool run_report_path_usable(const char *path, const char *model)
{
    struct stat st, ms;
    size_t len = strlen(path);

    if (len == 0 || path[len - 1] == '/') {
        cli_error("cannot write %s: not a file name", path);
        return false;
    }
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            cli_error("cannot write %s: exists and is not a regular file", path);
            return false;
        }
        if (stat(model, &ms) == 0 && ms.st_dev == st.st_dev && ms.st_ino == st.st_ino) {
            cli_error("cannot write %s: it is the model file", path);
            return false;
        }
    } else if (errno != ENOENT) {
        cli_error("cannot write %s: %s", path, strerror(errno));
        return false;
    }
    char *copy = strdup(path);
    if (!copy) {
        cli_error("out of memory");
        return false;
    }
    const char *dir = dirname(copy);
    struct stat ds;
    bool ok = stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode) && access(dir, W_OK | X_OK) == 0;
    if (!ok) {
        cli_error("cannot write %s: %s", path, errno ? strerror(errno) : "not a directory");
    } else {
        /* access() passes where creating fails (e.g. /proc as root): create and remove one. */
        char *probe = NULL;
        int fd = -1;
        if (asprintf(&probe, "%s/.ramforge-probe.XXXXXX", dir) < 0 || (fd = mkstemp(probe)) < 0) {
            cli_error("cannot write %s: %s", path, probe ? strerror(errno) : "out of memory");
            ok = false;
        } else {
            close(fd);
            unlink(probe);
        }
        free(probe);
    }
    free(copy);
    return ok;
}
