/* ramforge exec: shared by the command (cmd_exec.c), its checks of PROGRAM (exec_check.c) and
   what PROGRAM's own arguments say (exec_program.c). */
#ifndef RAMFORGE_TOOLS_EXEC_H
#define RAMFORGE_TOOLS_EXEC_H

#include <limits.h>
#include <stdbool.h>

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

/*
 * The context size PROGRAM's own arguments (argv, argc of them, argv[0] its name) ask for:
 * llama-server's and llama-cli's -c/--ctx-size N, or LLAMA_ARG_CTX_SIZE (exec_program.c).
 * 0: not given, 0 (the model's training context) or another program.
 */
long long exec_program_ctx_size(int argc, char **argv);

#endif
