/*
 * ramforge: where a llama.cpp model's memory is, with proof.
 *
 * Dispatches the subcommands: run (inference under the memory ledger),
 * inspect (the fit check and the tensor inventory), mkmodel (generated test models), bench,
 * serve (HTTP), watch (running processes, from outside).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "ramforge/forge/forge.h"
#include "ramforge/session.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s COMMAND [OPTIONS]\n"
            "\n"
            "Memory ledger and residency reports for llama.cpp inference.\n"
            "\n"
            "Commands:\n"
            "  run       load a GGUF model (mmap), generate greedily, and print where its\n"
            "            memory went and the speed (--memory-limit: under a real cap)\n"
            "  inspect   the fit check (-c N [--memory-limit SIZE]: would a run fit, before\n"
            "            loading) and the model's tensor inventory (no prompt is run)\n"
            "  mkmodel   generate a test model (llama, qwen3moe presets) with llama.cpp's API\n"
            "  bench     'run' as a process per repetition over policies and verified cache\n"
            "            conditions (warm, isolated-nonresident): results.tsv, summary.json\n"
            "  serve     llama-server's HTTP endpoints over one model kept under a memory\n"
            "            target, with an idle release between requests and /metrics\n"
            "  watch     the memory ledger of running llama.cpp processes, read from outside:\n"
            "            terminal view, JSON lines, Prometheus text\n"
            "  exec      run an unmodified llama.cpp program (llama-server) with ramforge's\n"
            "            preload: a session for every model it loads\n"
            "\n"
            "Options:\n"
            "  -h, --help     show this help\n"
            "  -V, --version  show ramforge's and llama.cpp's versions, where that\n"
            "                 llama.cpp comes from and the libllama loaded\n"
            "\n"
            "Run '%s COMMAND --help' for a command's options.\n"
            "Exit status: 0 success, 1 failure, 2 bad command line.\n",
            RF_PROGRAM, RF_PROGRAM);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RF_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return cli_finish_stdout(0);
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        const struct rf_version_info *v = rf_version();
        char lib[PATH_MAX];
        printf("ramforge %s (llama.cpp %s, %s)\n", v->ramforge, v->llama_cpp, v->llama_soname);
        printf("llama.cpp: %s\n", forge_llama_origin());
        if (forge_llama_loaded(lib, sizeof(lib)) == 0)
            printf("libllama loaded from %s\n", lib);
        const char *mismatch = forge_llama_mismatch(); /* the process runs another libllama */
        if (mismatch)
            cli_error("warning: %s", mismatch);
        return cli_finish_stdout(0);
    }
    static const struct {
        const char *name; /* held once: every usage error of the command names it */
        int (*fn)(int, char **);
    } table[] = {{"run", cmd_run},
                 {"inspect", cmd_inspect},
                 {"mkmodel", cmd_mkmodel},
                 {"serve", cmd_serve},
                 {"bench", cmd_bench},
                 /* running processes, from outside */
                 {"watch", cmd_watch},
                 /* an unmodified llama.cpp program with the preload */
                 {"exec", cmd_exec}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (!strcmp(cmd, table[i].name)) {
            cli_set_command(table[i].name);
            return cli_finish_stdout(table[i].fn(argc - 1, argv + 1));
        }
    }
    static const char *const commands[] = {"run",   "inspect", "mkmodel", "bench",
                                           "serve", "help",    "watch",   "exec"};
    const char *best = cli_closest(cmd, commands, sizeof(commands) / sizeof(commands[0]));
    if (best)
        cli_usage_error("unknown command '%s'; did you mean '%s'?", cmd, best);
    else
        cli_usage_error("unknown command '%s'", cmd);
    return RF_EXIT_USAGE;
}
