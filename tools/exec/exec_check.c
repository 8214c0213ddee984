/*
 * ramforge exec's checks of PROGRAM before it runs (exec.h): how it links
 * llama.cpp, read from its ELF file, and which libllama the dynamic loader
 * would give it, asked of the loader itself (`ld.so --list`, what ldd
 * runs: the program's own code is not run), whose build ID must be the one
 * ramforge was built against.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cli.h"
#include "exec.h"
#include "ramforge/session.h"
#include "ramforge/sys/elf_info.h"

#define LLAMA_ENTRY "llama_model_load_from_file" /* the call the preload stands in front of */

bool exec_find_program(const char *program, char out[PATH_MAX])
{
    struct stat st;
    if (strchr(program, '/')) {
        snprintf(out, PATH_MAX, "%s", program);
        if (stat(out, &st) == 0)
            return true;
        cli_error("exec: cannot run %s: %s", program, strerror(errno));
        return false;
    }
    const char *path = getenv("PATH");
    for (const char *p = path && path[0] ? path : "/usr/local/bin:/usr/bin:/bin"; p;) {
        const char *colon = strchr(p, ':');
        int len = colon ? (int)(colon - p) : (int)strlen(p);
        snprintf(out, PATH_MAX, "%.*s%s%s", len, p, len ? "/" : "", program);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return true;
        p = colon ? colon + 1 : NULL;
    }
    cli_error("exec: cannot run %s: not found in PATH", program);
    return false;
}

/*
 * The libllama the loader resolves for path (`interp --list path`): its file into lib; "" when
 * the program does not need one. Returns false (said) when the loader could not be asked.
 */
static bool loader_libllama(const char *interp, const char *path, char lib[PATH_MAX])
{
    int fds[2];
    lib[0] = '\0';
    if (pipe(fds) < 0) {
        cli_error("exec: cannot ask the dynamic loader about %s: %s", path, strerror(errno));
        return false;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        unsetenv("LD_PRELOAD"); /* the program's own libraries, not an outer preload's */
        execl(interp, interp, "--list", path, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = pid > 0 ? fdopen(fds[0], "r") : NULL;
    char line[PATH_MAX + 128];
    while (f && fgets(line, sizeof(line), f)) {
        char name[256], file[PATH_MAX];
        if (sscanf(line, " %255s => %4095s", name, file) == 2 && strncmp(name, "libllama.", 9) == 0)
            snprintf(lib, PATH_MAX, "%s", strcmp(file, "not") == 0 ? "not found" : file);
    }
    if (f)
        fclose(f);
    else
        close(fds[0]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        cli_error("exec: the dynamic loader %s could not list the libraries of %s", interp, path);
        return false;
    }
    return true;
}

bool exec_check_program(const char *path)
{
    const struct rf_version_info *v = rf_version();
    struct rfsys_elf_info prog, self, lib;
    char libpath[PATH_MAX];

    int rc = rfsys_elf_inspect(path, LLAMA_ENTRY, &prog);
    if (rc == -ENOEXEC)
        return true; /* a script: the preload checks what its interpreter's children load */
    if (rc < 0) {
        cli_error("exec: cannot read %s: %s", path, rf_strerror(rc));
        return false;
    }
    if (prog.defines_symbol) {
        cli_error("exec: %s links llama.cpp statically (it defines %s itself): the preload "
                  "cannot stand between it and libllama; 'ramforge watch' observes such a "
                  "process from outside",
                  path, LLAMA_ENTRY);
        return false;
    }
    if (!prog.dynamic) {
        cli_error("exec: %s is statically linked: no preloaded library can run in it", path);
        return false;
    }
    rc = rfsys_elf_inspect("/proc/self/exe", NULL, &self);
    if (rc < 0 || !self.interp[0]) {
        cli_error("exec: cannot find the dynamic loader: %s", rf_strerror(rc < 0 ? rc : -ENOENT));
        return false;
    }
    char real[PATH_MAX]; /* $ORIGIN is the real file's directory when the kernel runs it, but
                            the directory of the path given when the loader lists it */
    if (!loader_libllama(self.interp, realpath(path, real) ? real : path, libpath))
        return false;
    if (!libpath[0]) {
        cli_error("exec: %s does not link libllama: the preload does nothing in it (a child "
                  "process that loads a model through libllama is managed)",
                  path);
        return true;
    }
    if (strcmp(libpath, "not found") == 0)
        return true; /* the loader will say so itself when it runs */
    rc = rfsys_elf_inspect(libpath, NULL, &lib);
    if (rc < 0 || !lib.has_build_id || strcmp(lib.build_id, v->llama_build_id) != 0) {
        cli_error("exec: %s runs %s (build ID %s), not the llama.cpp ramforge was built against "
                  "(%s, %s, build ID %s): refused (a mismatched llama_model_params is undefined "
                  "behaviour)",
                  path, libpath, rc == 0 && lib.has_build_id ? lib.build_id : "unknown",
                  v->llama_cpp, v->llama_soname, v->llama_build_id);
        return false;
    }
    return true;
}
