/*
** repl/cmd_repl.c: `ember repl`, the interactive shell. It reads
** statements, runs each one and prints its result where .output says:
**
**   - a line starting with '.' is a dot command (repl/repl_dot.c);
**   - anything else is a query, which goes on over several lines while a
**     bracket, paren, brace or quote is still open (prompt "   ...> ").
**
** At a terminal it edits lines with libedit (history in $EMBER_HISTORY,
** default ~/.ember_history, loaded at start and written after every
** statement, so a session ended by ^C during a query loses nothing; tab
** completion from repl/repl_complete.c; ^C at the prompt drops the
** statement being typed). Otherwise it reads a script from stdin with no
** prompts and exits 1 if any statement failed, so that it works in
** pipelines: `echo 'merge(cpu)' | ember repl -d DB`.
*/
#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <locale.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "query/query.h"
#include "repl/cli.h"

#define PROMPT "ember> "
#define PROMPT_MORE "   ...> "
#define HISTORY_SIZE 1000

/* The line editor's side of a session (NULL members in a script). */
typedef struct repl_term {
    EditLine *el;
    History *hist;
    char *hist_path;            /* NULL: no history file */
    bool hist_warned;           /* said once that it cannot be written */
    bool cancel;                /* ^C: drop the line and the statement */
} repl_term;

typedef struct repl_session {
    em_repl r;
    repl_term t;
    em_buf stmt;                /* the statement being read, NUL-ended */
} repl_session;

/* ---- statements spanning lines ------------------------------------------ */

/* What a scan of statement text finds. */
typedef struct stmt_info {
    bool open;                  /* a bracket or quote is still open */
    bool empty;                 /* only blanks and comments */
    size_t semi;                /* 1 + offset of a final ';', else 0 */
} stmt_info;

/* How token KIND changes the bracket depth. */
static int stmt_depth(em_tok kind)
{
    if (kind == EM_TOK_LPAREN || kind == EM_TOK_LBRACKET ||
        kind == EM_TOK_LBRACE)
        return 1;
    if (kind == EM_TOK_RPAREN || kind == EM_TOK_RBRACKET ||
        kind == EM_TOK_RBRACE)
        return -1;
    return 0;
}

/* Appends the N blank bytes at S, a newline as a space. */
static int flat_blanks(em_buf *flat, const char *s, size_t n)
{
    int rc = EMBER_OK;

    for (size_t i = 0; i < n && rc == EMBER_OK; i++)
        rc = em_buf_put(flat, s[i] == '\n' ? " " : s + i, 1);
    return rc;
}

/* Scans S with the query lexer in its tolerant mode, as SQLite's
** sqlite3_complete sits on its tokenizer: brackets are counted, and a
** string the end cuts keeps the statement open (a quoted one over lines
** too, which the query then rejects with its caret). With FLAT, also
** writes the statement on one line for the history: the tokens as typed,
** comments dropped, newlines between tokens as spaces. */
static int stmt_scan(const char *s, stmt_info *info, em_buf *flat)
{
    em_lexer lx;
    em_token t;
    size_t end = 0;             /* just past the previous token */
    int depth = 0, rc = EMBER_OK;

    memset(info, 0, sizeof *info);
    info->empty = true;
    em_lex_init_mode(&lx, s, EM_LEX_TOLERANT | EM_LEX_COMMENTS);
    do {
        em_lex_next(&lx, &t);
        if (flat != NULL && rc == EMBER_OK)
            rc = flat_blanks(flat, s + end, t.pos - end);
        end = t.pos + t.len;
        if (t.kind == EM_TOK_COMMENT || t.kind == EM_TOK_EOF)
            continue;
        depth += stmt_depth(t.kind);
        info->empty = false;
        info->semi = t.kind == EM_TOK_UNKNOWN && s[t.pos] == ';' ? end : 0;
        info->open = t.kind == EM_TOK_STRING &&
                     (t.flags & EM_TOKF_INCOMPLETE) != 0;
        if (flat != NULL && rc == EMBER_OK)
            rc = em_buf_put(flat, s + t.pos, t.len);
    } while (t.kind != EM_TOK_EOF);
    info->open = info->open || depth > 0;
    return rc;
}

/* ---- history ------------------------------------------------------------ */

/* $EMBER_HISTORY ("" turns the file off), else ~/.ember_history; NULL
** when there is neither or no memory: history then lives in memory only. */
static char *history_path(void)
{
    const char *env = getenv("EMBER_HISTORY"), *home = getenv("HOME");
    char *p;
    size_t n;

    if (env != NULL)
        return env[0] != '\0' ? em_strdup(env) : NULL;
    if (home == NULL || home[0] == '\0')
        return NULL;
    n = strlen(home) + sizeof "/.ember_history";
    if ((p = em_malloc(n)) != NULL)
        snprintf(p, n, "%s/.ember_history", home);
    return p;
}

/* Writes the history file, created private (queries may name things
** worth keeping to oneself). A failure is said once and is not fatal. */
static void history_save(repl_term *t)
{
    HistEvent ev;
    int fd;

    if (t->hist == NULL || t->hist_path == NULL)
        return;
    fd = open(t->hist_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    if ((fd < 0 || history(t->hist, &ev, H_SAVE, t->hist_path) < 0) &&
        !t->hist_warned) {
        fprintf(stderr, "ember repl: note: history not saved to %s: %s\n",
                t->hist_path, fd < 0 ? strerror(errno) : "write failed");
        t->hist_warned = true;
    }
}

static void history_add(repl_term *t, const char *line)
{
    HistEvent ev;

    if (t->hist == NULL || line[0] == '\0')
        return;
    history(t->hist, &ev, H_ENTER, line);
    history_save(t);
}

/* ---- running statements ------------------------------------------------- */

int em_repl_fail(em_repl *r, const char *fmt, ...)
{
    va_list ap;

    if (r->interactive)
        fputs("error: ", stderr);
    else
        fprintf(stderr, "ember repl: line %u: ", r->line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    r->failed = true;
    return 1;
}

static double elapsed_ms(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 +
           (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* What a note of the statement at r->line starts with: "ember repl" at a
** terminal, "ember repl: line N" in a script (em_repl_fail's rule). */
static const char *repl_who(const em_repl *r, char *buf, size_t n)
{
    if (r->interactive)
        return "ember repl";
    snprintf(buf, n, "ember repl: line %u", r->line);
    return buf;
}

/* The format for a result of KIND: .format's when it fits; otherwise the
** kind's own (spark for series, which a terminal shows best), with a note
** when .format asked for something else. */
static const char *repl_format(const em_repl *r, int kind)
{
    const char *def = kind == EMBER_RESULT_SERIES ? "spark"
                                                  : em_render_default(kind);
    char who[64];

    if (r->format == NULL)
        return def;
    if (em_render_fits(kind, r->format))
        return r->format;
    fprintf(stderr, "%s: note: .format %s does not fit a %s result; "
            "showing it as %s\n", repl_who(r, who, sizeof who), r->format,
            em_cli_kind_name(kind), def);
    return def;
}

/* Options for rendering to F: at a terminal, its width and colors, and
** unless .limit is set, a cut at its height so a long answer does not
** scroll the question away (the renderer notes what it left out). */
static void repl_render_opts(const em_repl *r, FILE *f, const char *text,
                             em_render_opts *o)
{
    unsigned cols, rows;

    em_cli_term_size(fileno(f), &cols, &rows);
    memset(o, 0, sizeof *o);
    o->sz = sizeof *o;
    o->db = r->db;
    o->limit = r->limit;
    o->color = em_cli_color_auto(f);
    o->width = cols;
    if (r->limit == 0 && rows > 0)
        o->max_lines = rows > 4 ? rows - 2 : 2;
    o->query = text;
    o->source_path = "";                /* list: sources as pprof finds them */
}

static int repl_render(em_repl *r, const ember_result *res, const char *text)
{
    FILE *f = r->out != NULL ? r->out : stdout;
    const char *fmt = repl_format(r, ember_result_kind(res));
    em_render_opts o;
    char who[64];
    int rc;

    if (em_render_binary(fmt) && r->out == NULL)
        return em_repl_fail(r, "%s writes binary data: send it to a file "
                            "first with .output FILE", fmt);
    repl_who(r, who, sizeof who);
    for (size_t i = 0; i < ember_result_notes(res); i++)
        fprintf(stderr, "%s: note: %s\n", who, ember_result_note(res, i));
    em_cli_note_sums(who, res);
    repl_render_opts(r, f, text, &o);
    rc = em_render_result(f, res, fmt, &o);
    if (fflush(f) != 0 && rc == EMBER_OK)
        rc = em_err(EMBER_EIO, "%s: %s", r->out_path ? r->out_path : "stdout",
                    strerror(errno));
    return rc == EMBER_OK ? 0 : em_repl_fail(r, "%s", ember_errmsg(r->db));
}

int em_repl_query(em_repl *r, const char *text)
{
    ember_query_opts qo = { .sz = sizeof qo, .step_ms = r->step_ms };
    ember_result *res = NULL;
    struct timespec t0, t1, t2;
    int rc, st;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = em_cli_range(r->from, r->to, em_cli_now_ms(), &qo.from_ms,
                      &qo.to_ms);
    if (rc == EMBER_OK)
        rc = em_source_query(&r->src, text, &qo, 0, &res);
    if (rc != EMBER_OK) {
        em_repl_cache_drop(r);  /* the names it offered may be stale */
        return em_repl_fail(r, "%s", ember_errmsg(r->db));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    st = repl_render(r, res, text);
    ember_result_free(res);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    if (r->timing)
        fprintf(stderr, "time: %.3f ms (query %.3f ms, output %.3f ms)\n",
                elapsed_ms(&t0, &t2), elapsed_ms(&t0, &t1),
                elapsed_ms(&t1, &t2));
    return st;
}

/* Runs the finished statement in s->stmt and forgets it. */
static int session_run_stmt(repl_session *s)
{
    char *text = (char *)s->stmt.p;
    em_buf flat = { 0 };
    stmt_info info;
    size_t len = s->stmt.len - 1;   /* the NUL */
    int st = 0;

    if (stmt_scan(text, &info, &flat) != EMBER_OK ||
        em_buf_put(&flat, "", 1) != EMBER_OK) {
        st = em_repl_fail(&s->r, "out of memory");
        goto out;
    }
    if (info.empty)
        goto out;
    while (flat.len > 1 && flat.p[flat.len - 2] == ' ')
        flat.p[--flat.len - 1] = '\0';
    history_add(&s->t, (const char *)flat.p);
    if (info.semi != 0)
        text[info.semi - 1] = ' ';  /* sqlite3's habit of ending with ';' */
    while (len > 0 && strchr(" \t\r\n", text[len - 1]) != NULL)
        text[--len] = '\0';
    st = em_repl_query(&s->r, text);
out:
    em_buf_free(&flat);
    s->stmt.len = 0;
    return st;
}

/* Appends LINE to the statement in B, ending it with a newline (the last
** line of a script may lack one) and keeping B NUL-terminated. */
static int stmt_append(em_buf *b, const char *line)
{
    size_t n = strlen(line);
    int rc;

    if (b->len > 0)
        b->len--;               /* the NUL goes back at the end */
    rc = em_buf_put(b, line, n);
    if (rc == EMBER_OK && (n == 0 || line[n - 1] != '\n'))
        rc = em_buf_put(b, "\n", 1);
    return rc == EMBER_OK ? em_buf_put(b, "", 1) : rc;
}

/* Feeds one input LINE (its newline may be missing at the end of a
** script): a dot command runs at once, a query once it is complete. */
static int session_feed(repl_session *s, const char *line)
{
    stmt_info info;
    const char *p = line;

    if (s->stmt.len == 0) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '.') {
            char *cmd = em_strdup(p);
            int st;
            if (cmd == NULL)
                return em_repl_fail(&s->r, "out of memory");
            cmd[strcspn(cmd, "\r\n")] = '\0';
            history_add(&s->t, cmd);
            st = em_repl_dot(&s->r, cmd);
            em_free(cmd);
            return st;
        }
    }
    if (stmt_append(&s->stmt, line) != EMBER_OK) {
        s->stmt.len = 0;
        return em_repl_fail(&s->r, "out of memory");
    }
    stmt_scan((const char *)s->stmt.p, &info, NULL);
    if (info.open)
        return 0;
    return session_run_stmt(s);
}

/* ---- reading: a script, or a terminal through libedit ------------------- */

static void session_script(repl_session *s)
{
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;

    while (!s->r.quit && getline(&line, &cap, stdin) != -1) {
        lineno++;
        if (s->stmt.len == 0)
            s->r.line = lineno;
        session_feed(s, line);
    }
    free(line);                 /* getline's, not ours */
    if (!s->r.quit && s->stmt.len > 0)
        session_run_stmt(s);    /* an unfinished statement: let it say so */
}

static char *prompt_fn(EditLine *el)
{
    repl_session *s = NULL;

    el_get(el, EL_CLIENTDATA, &s);
    return s != NULL && s->stmt.len > 0 ? PROMPT_MORE : PROMPT;
}

/* ^C at the prompt: ends the line, which the loop then throws away with
** the statement it belonged to (psql's and sqlite3's habit). */
static unsigned char cancel_fn(EditLine *el, int ch)
{
    repl_session *s = NULL;

    EM_UNUSED(ch);
    el_get(el, EL_CLIENTDATA, &s);
    if (s != NULL)
        s->t.cancel = true;
    fputs("^C\n", stdout);
    return CC_NEWLINE;
}

static int term_open(repl_session *s)
{
    repl_term *t = &s->t;
    HistEvent ev;

    setlocale(LC_CTYPE, "");    /* libedit reads UTF-8 by the locale */
    t->hist = history_init();
    t->el = el_init("ember", stdin, stdout, stderr);
    if (t->hist == NULL || t->el == NULL)
        return em_cli_fail(1, "repl", "cannot start the line editor");
    history(t->hist, &ev, H_SETSIZE, HISTORY_SIZE);
    history(t->hist, &ev, H_SETUNIQUE, 1);
    t->hist_path = history_path();
    if (t->hist_path != NULL)
        history(t->hist, &ev, H_LOAD, t->hist_path);  /* none yet is fine */
    el_set(t->el, EL_EDITOR, "emacs");
    el_set(t->el, EL_CLIENTDATA, s);
    el_set(t->el, EL_PROMPT, prompt_fn);
    el_set(t->el, EL_HIST, history, t->hist);
    el_set(t->el, EL_SIGNAL, 1);
    /* ^C reaches us as a key at the prompt, and as SIGINT (ending ember)
    ** while a query runs, when the terminal is back in its own mode. */
    el_set(t->el, EL_SETTY, "-d", "-isig", NULL);
    /* el_wset: the narrow EL_ADDFN copies its strings and never frees
    ** them (libedit's own "XXX This leaks"); the wide one keeps ours. */
    el_wset(t->el, EL_ADDFN, L"ember-cancel", L"drop the statement",
            cancel_fn);
    el_set(t->el, EL_BIND, "^C", "ember-cancel", NULL);
    em_repl_bind(t->el);
    el_source(t->el, NULL);     /* the user's ~/.editrc, if any */
    return 0;
}

static void term_close(repl_term *t)
{
    history_save(t);
    if (t->el != NULL)
        el_end(t->el);
    if (t->hist != NULL)
        history_end(t->hist);
    em_free(t->hist_path);
}

static void session_terminal(repl_session *s)
{
    printf("ember %s: .help lists commands, .quit or ^D leaves\n",
           EMBER_VERSION_STRING);
    while (!s->r.quit) {
        int n = 0;
        const char *line;

        s->r.pending = s->stmt.len > 0 ? (const char *)s->stmt.p : NULL;
        line = el_gets(s->t.el, &n);
        if (s->t.cancel) {      /* before EOF: ^C on an empty line */
            s->t.cancel = false;
            s->stmt.len = 0;
            continue;
        }
        if (line == NULL || n <= 0) {
            fputc('\n', stdout);
            break;              /* ^D or a read error: leave */
        }
        session_feed(s, line);
    }
    s->r.pending = NULL;
    if (!s->r.quit && s->stmt.len > 0)
        session_run_stmt(s);
}

/* ---- the command -------------------------------------------------------- */

static void session_free(repl_session *s)
{
    em_repl *r = &s->r;

    if (r->out != NULL)
        fclose(r->out);
    em_free(r->out_path);
    em_free(r->format);
    em_free(r->from);
    em_free(r->to);
    em_repl_cache_drop(r);
    em_buf_free(&s->stmt);
    em_source_close(&r->src);
    r->db = NULL;
}

int em_cmd_repl(int argc, char **argv)
{
    repl_session s;
    em_source_args a;
    int st = em_source_only_args("repl", argc, argv, &a);

    if (st != 0)
        return st;              /* it said why */
    memset(&s, 0, sizeof s);
    if (em_source_open("repl", &a, 1, &s.r.src) != EMBER_OK)
        return 1;
    s.r.db = s.r.src.db;
    s.r.interactive = isatty(STDIN_FILENO);
    if (!s.r.interactive)
        session_script(&s);
    else if ((st = term_open(&s)) == 0)
        session_terminal(&s);
    if (s.r.interactive)
        term_close(&s.t);
    if (st == 0 && !s.r.interactive && s.r.failed)
        st = 1;
    session_free(&s);
    return st;
}
