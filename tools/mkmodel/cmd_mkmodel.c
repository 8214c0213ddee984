/* ramforge mkmodel: generate a GGUF test model (llama, or a MoE: qwen3moe, qwen2moe). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge.h"
#include "ramforge/forge/forge_mkmodel.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s mkmodel -o PATH [OPTIONS]\n"
            "\n"
            "Generate a GGUF model (llama, or a mixture of experts) with llama.cpp's own API\n"
            "(llama_model_init_from_user + llama_model_save_to_file). Weights come from a\n"
            "seeded PRNG: the same arguments give a byte-identical file. The tokenizer is\n"
            "llama.cpp's ggml-vocab-llama-spm.gguf (32000 tokens).\n"
            "\n"
            "Options:\n"
            "  -o, --output PATH    file to write (written to a temporary file, then renamed);\n"
            "                       an existing PATH is refused unless --force\n"
            "      --force          replace an existing PATH\n"
            "  -P, --preset NAME    tiny      2 layers, n_embd 64        (~5 MiB as q8_0)\n"
            "                       small     4 layers, n_embd 256       (~20 MiB as q8_0)\n"
            "                       tinyllama 22 layers, n_embd 2048, n_ff 5632, 32/4 heads\n"
            "                                 (TinyLlama-1.1B shapes, ~1.1 GiB as q8_0)\n"
            "                       qwen3moe-small  qwen3moe, 4 layers, n_embd 256, 16 experts\n"
            "                                 of ffn 128, 4 used (~24 MiB as q8_0)\n"
            "                       qwen3moe-a3b    Qwen3-30B-A3B's shape scaled: qwen3moe, 16\n"
            "                                 layers, n_embd 2048, 16/4 heads, 64 experts of\n"
            "                                 ffn 224, 8 used (~1.7 GiB as q8_0)\n"
            "                       qwen2moe-small  qwen2moe, 4 layers, 16 experts (4 used) and\n"
            "                                 a shared expert of ffn 256 (~25 MiB as q8_0)\n"
            "                       default: tiny\n"
            "  -T, --type TYPE      f32, f16, q8_0 or q4_0 for the 2-D weights (default q8_0);\n"
            "                       norms stay f32\n"
            "  -s, --seed N         PRNG seed, 0..2^63-1 (default 42)\n"
            "      --route-skew S   MoE presets: skew the routing on purpose (0..8, default 0:\n"
            "                       random router rows, near-uniform routing); the router row\n"
            "                       of the expert at popularity rank r (a seeded permutation\n"
            "                       per layer) is scaled by (r + 1)^-S. Written into the model\n"
            "                       as ramforge.route_skew\n"
            "      --vocab PATH     tokenizer GGUF (default: the pinned llama.cpp's)\n"
            "  -q, --quiet          no progress line and no \"wrote PATH (SIZE)\" line\n"
            "  -v, --verbose        show llama.cpp's log\n"
            "  -h, --help           show this help\n"
            "\n"
            "A progress line goes to stderr for small and tinyllama when stderr is a terminal;\n"
            "at the end, \"wrote PATH (SIZE)\" goes to stderr.\n",
            RF_PROGRAM);
}

static void progress(uint64_t done, uint64_t total, void *user_data)
{
    (void)user_data;
    if (done > total)
        done = total;
    fprintf(stderr, "\rramforge: mkmodel: %llu/%llu tensors", (unsigned long long)done,
            (unsigned long long)total);
    fflush(stderr);
}

int cmd_mkmodel(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"preset", required_argument, NULL, 'P'},
        {"type", required_argument, NULL, 'T'},
        {"seed", required_argument, NULL, 's'},
        {"vocab", required_argument, NULL, 'V'},
        {"quiet", no_argument, NULL, 'q'},
        {"force", no_argument, NULL, 'F'},
        {"verbose", no_argument, NULL, 'v'},
        {"route-skew", required_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct forge_mkmodel_params p = {
        .preset = FORGE_PRESET_TINY,
        .type = "q8_0",
        .seed = 42,
        .vocab_path = RAMFORGE_DEFAULT_VOCAB,
    };
    bool quiet = false, verbose = false, force = false, skew_given = false;
    char err[FORGE_ERR_MAX];
    long long v;
    int c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:P:T:s:qvh", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            p.out_path = optarg;
            break;
        case 'P':
            if (forge_mkmodel_preset_parse(optarg, &p.preset) < 0) {
                cli_usage_error("unknown preset '%s' (expected tiny, small, tinyllama, "
                                "qwen3moe-small, qwen3moe-a3b or qwen2moe-small)",
                                optarg);
                return RF_EXIT_USAGE;
            }
            break;
        case 'T':
            p.type = optarg;
            if (strcmp(optarg, "f32") && strcmp(optarg, "f16") && strcmp(optarg, "q8_0") &&
                strcmp(optarg, "q4_0")) {
                cli_usage_error("unknown type '%s' (expected f32, f16, q8_0 or q4_0)", optarg);
                return RF_EXIT_USAGE;
            }
            break;
        case 's':
            if (!cli_parse_int("seed", optarg, 0, INT64_MAX, &v))
                return RF_EXIT_USAGE;
            p.seed = (uint64_t)v;
            break;
        case 'V':
            p.vocab_path = optarg;
            break;
        case 'R': {
            char *end = NULL;
            errno = 0;
            double skew = strtod(optarg, &end);
            if (!*optarg || *end || errno || !isfinite(skew) || skew < 0.0 || skew > 8.0) {
                cli_usage_error("invalid --route-skew '%s': expected a number in 0..8", optarg);
                return RF_EXIT_USAGE;
            }
            p.route_skew = (float)skew;
            skew_given = true;
            break;
        }
        case 'q':
            quiet = true;
            break;
        case 'F':
            force = true;
            break;
        case 'v':
            verbose = true;
            break;
        default: /* 'h' too */
            return cli_help_or_bad_option(c, argv, opts, usage);
        }
    }
    if (optind < argc) {
        cli_usage_error("unexpected argument '%s'", argv[optind]);
        return RF_EXIT_USAGE;
    }
    if (skew_given && !forge_mkmodel_preset_is_moe(p.preset)) {
        cli_usage_error("--route-skew needs a MoE preset (qwen3moe-small, qwen3moe-a3b, "
                        "qwen2moe-small)");
        return RF_EXIT_USAGE;
    }
    if (!p.out_path) {
        cli_usage_error("missing -o/--output PATH");
        return RF_EXIT_USAGE;
    }
    struct stat st;
    if (!force && lstat(p.out_path, &st) == 0) {
        cli_error("cannot write %s: file exists (--force replaces it)", p.out_path);
        return RF_EXIT_FAILURE;
    }
    if (verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(verbose);
    if (!quiet && p.preset != FORGE_PRESET_TINY && isatty(STDERR_FILENO))
        p.progress = progress;
    int rc = forge_mkmodel(&p, err);
    if (p.progress)
        fputc('\n', stderr);
    if (rc < 0) {
        cli_error("%s", err);
        return RF_EXIT_FAILURE;
    }
    if (!quiet && stat(p.out_path, &st) == 0) {
        char size[32];
        fprintf(stderr, "%s: wrote %s (%s)\n", RF_PROGRAM, p.out_path,
                cli_format_bytes((uint64_t)st.st_size, false, size, sizeof(size)));
    }
    return 0;
}
