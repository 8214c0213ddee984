/* ramforge exec: shared by the command (cmd_exec.c), its checks of PROGRAM (exec_check.c) and
   what PROGRAM's own arguments say (exec_program.c). */
#ifndef RAMFORGE_TOOLS_EXEC_H
#define RAMFORGE_TOOLS_EXEC_H

#include <limits.h>
#include <stdbool.h>

#include "common/session_options.h"

/*
 * PROGRAM's full path as execvp would find it (a name without '/' searched
 * in PATH) into out. Prints the reason and returns false when there is none.
 */
bool exec_find_program(const char *program, char out[PATH_MAX]);

/*
 * Whether the preload can stand between the program at path and its
 * libllama. Refuses (prints one line, returns false) when the program links
 * llama.cpp statically (and points to `ramforge watch`), is statically
 * linked, or runs a libllama of another build than ramforge's (naming
 * both). Says in one line that the preload will do nothing when the
 * program does not link libllama, and returns true (its children may).
 * A file that is not ELF (a script) is not checked: its interpreter's
 * children are, by the preload, at their first model load.
 */
bool exec_check_program(const char *path);

#define EXEC_SERVER_CACHE_RAM_DEFAULT_MIB 8192 /* llama-server's --cache-ram default */

/* Whether argv0's file name starts with name ("llama-server"). */
bool exec_program_is(const char *argv0, const char *name);

/*
 * The value of PROGRAM's last -shrt/--lng argument (argv, argc of them), else the variable
 * env's (llama.cpp's LLAMA_ARG_*: an argument wins); NULL: neither.
 */
const char *exec_program_arg(int argc, char **argv, const char *shrt, const char *lng,
                             const char *env);

/*
 * The context size PROGRAM's own arguments (argv, argc of them, argv[0] its name) ask for:
 * llama-server's and llama-cli's -c/--ctx-size N, or LLAMA_ARG_CTX_SIZE (exec_program.c).
 * 0: not given, 0 (the model's training context) or another program.
 */
long long exec_program_ctx_size(int argc, char **argv);

/*
 * The KV cache's types PROGRAM's own arguments ask for (llama-server's and llama-cli's
 * -ctk/--cache-type-k and -ctv/--cache-type-v, or LLAMA_ARG_CACHE_TYPE_K/V; f16 where one
 * is not given) into req's has_cache_types, type_k and type_v; left unset for another
 * program, or a type exec does not know (llama.cpp says what it thinks of it).
 */
void exec_program_cache_types(int argc, char **argv, struct rf_operation_request *req);

/*
 * llama-server's prompt-cache bound (-cram/--cache-ram N MiB, LLAMA_ARG_CACHE_RAM, default
 * 8192) into *mib: true when PROGRAM is llama-server and the bound is one (N >= 0; 0: the
 * cache off); false for another program, -1 (no limit) or a value llama.cpp would refuse.
 */
bool exec_program_cache_ram(int argc, char **argv, long long *mib);

/*
 * llama-server's --cache-ram sized to the room under the binding limit (exec_cache.c): when
 * PROGRAM is llama-server with a model, a limit binds (s's --memory-limit, else the cgroup
 * hierarchy's) and the user gave no --cache-ram (unless keep), sets LLAMA_ARG_CACHE_RAM and
 * *mib (*has_mib true) and says so in one line; the user's own (*has_mib, *mib as
 * exec_program_cache_ram read them) is kept, with a warning when it cannot fit.
 */
void exec_cache_fit(int argc, char **argv, const struct session_options *s, bool keep,
                    bool *has_mib, long long *mib);

#endif
