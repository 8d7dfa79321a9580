/*
** repl/cli.h: the `ember` command line. One table of commands (name, usage,
** summary, handler) drives dispatch and help, as Redis's command table does;
** the REPL and the server will share it.
**
** Handlers return the process exit status: 0 on success, 1 when the command
** ran but found a problem (a failed file, a damaged database), 2 on a usage
** error. Errors go to stderr as one line "ember CMD: what: why".
*/
#ifndef EM_CLI_H
#define EM_CLI_H

#include <stdint.h>

#include "ember.h"

#define EM_MAX_CLI_LABELS 64

typedef struct em_cmd {
    const char *name;
    const char *usage;          /* arguments after the name */
    const char *summary;        /* one line for `ember --help` */
    const char *help;           /* the long text for `ember help NAME` */
    int (*run)(int argc, char **argv);
} em_cmd;

extern const em_cmd em_commands[];
extern const unsigned em_ncommands;

int em_cmd_import(int argc, char **argv);
int em_cmd_query(int argc, char **argv);
int em_cmd_stats(int argc, char **argv);
int em_cmd_verify(int argc, char **argv);

/* Prints "ember CMD: message" (printf-style) to stderr; returns STATUS. */
int em_cli_fail(int status, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints the usage line of CMD to stderr and returns 2. */
int em_cli_usage(const char *cmd);
/* Splits "k=v" into a label (pointers into ARG, which it modifies). */
int em_cli_label(char *arg, ember_label *out);
/* Opens DIR for the command CMD (read-only when RDONLY); prints why not. */
int em_cli_open(const char *cmd, const char *dir, int rdonly, ember_db **db);
/* Milliseconds since the epoch, now. */
int64_t em_cli_now_ms(void);

#endif
