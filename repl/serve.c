/*
** repl/serve.c: `ember serve`, the command. It opens the database, makes
** each listening socket itself (a Unix socket, mode 0600, or TCP, bound to
** loopback unless a token guards it), hands each to a libmicrohttpd daemon
** with a pool of threads, starts the background compaction
** (repl/compact_sched.c: every hour unless told), and waits for SIGINT or
** SIGTERM. Then it stops accepting, lets the requests in flight finish
** (for up to STOP_GRACE_S), lets a compaction in progress end, syncs the
** database and exits 0.
**
** Signals are blocked in every thread before the daemons start, and the
** main thread takes them with sigwait: a handler could not safely do any
** of the stop's work.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "query/query.h"
#include "repl/serve.h"

#define STOP_GRACE_S 30
#define DEFAULT_UNIX "ember.sock"       /* in the database directory */
#define TOKEN_MAX 4096
/* A query's limits unless told (docs/protocol.md, "Limits"): Grafana's
** own data source timeout is 30 s, and 1 GiB is a merge of some ten
** million distinct stacks. */
#define DEFAULT_QUERY_TIMEOUT_MS 30000
#define DEFAULT_QUERY_MEMORY (UINT64_C(1) << 30)

/* ---- addresses ----------------------------------------------------------- */

void em_serve_addr_str(const struct sockaddr *sa, char *buf, size_t cap)
{
    char tmp[INET6_ADDRSTRLEN];

    if (sa->sa_family == AF_INET &&
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, tmp,
                  sizeof tmp) != NULL)
        snprintf(buf, cap, "%s", tmp);
    else if (sa->sa_family == AF_INET6 &&
             inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
                       tmp, sizeof tmp) != NULL)
        snprintf(buf, cap, "[%s]", tmp);
    else
        snprintf(buf, cap, "unix");
}

/* ---- listening sockets ------------------------------------------------------ */

/* A Unix socket at PATH, mode 0600. A socket file left by a server that is
** gone is replaced; one that answers is another server's, and refused. */
static int listen_unix(const char *path, int *fd)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    mode_t old;
    int s, rc;

    if (strlen(path) >= sizeof a.sun_path)
        return em_cli_fail(1, "serve", "unix:%s: the path is longer than "
                           "%zu bytes", path, sizeof a.sun_path - 1);
    memcpy(a.sun_path, path, strlen(path) + 1);
    if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return em_cli_fail(1, "serve", "unix:%s: %s", path, strerror(errno));
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        close(s);
        return em_cli_fail(1, "serve", "unix:%s: another server is "
                           "listening there", path);
    }
    if (errno == ECONNREFUSED)
        unlink(path);           /* a dead server's socket file */
    old = umask(0177);          /* the socket is created 0600 */
    rc = bind(s, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (rc != 0 || listen(s, 1024) != 0) {
        em_cli_fail(1, "serve", "unix:%s: %s", path, strerror(errno));
        close(s);
        return 1;
    }
    *fd = s;
    return 0;
}

/* Splits "ADDR:PORT", "[V6]:PORT" or "PORT" into host and port. */
static int tcp_split(char *spec, const char **host, const char **port)
{
    char *colon = strrchr(spec, ':');

    *host = "127.0.0.1";
    *port = spec;
    if (colon == NULL)
        return 0;
    *colon = '\0';
    *port = colon + 1;
    *host = spec;
    if (spec[0] == '[') {
        size_t n = strlen(spec);
        if (n < 2 || spec[n - 1] != ']')
            return -1;
        spec[n - 1] = '\0';
        *host = spec + 1;
    }
    return **host == '\0' || **port == '\0' ? -1 : 0;
}

static bool is_loopback(const struct addrinfo *ai)
{
    if (ai->ai_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr)
                >> 24) == 127;
    return ai->ai_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)ai->ai_addr)
                                    ->sin6_addr);
}

static int tcp_bind(const char *spec, const struct addrinfo *ai, int *fd)
{
    int one = 1;
    int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                   ai->ai_protocol);

    if (s < 0)
        return em_cli_fail(1, "serve", "tcp:%s: %s", spec, strerror(errno));
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || listen(s, 1024) != 0) {
        em_cli_fail(1, "serve", "tcp:%s: %s", spec, strerror(errno));
        close(s);
        return 1;
    }
    *fd = s;
    return 0;
}

/* A TCP socket at SPEC; a non-loopback address only with a token. */
static int listen_tcp(const char *spec, bool have_token, int *fd)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    char *copy = em_strdup(spec);
    const char *host, *port;
    int st = 1, grc;

    if (copy == NULL || tcp_split(copy, &host, &port) != 0) {
        em_free(copy);
        return em_cli_fail(2, "serve", "--listen tcp:%s: expected "
                           "tcp:PORT, tcp:ADDR:PORT or tcp:[V6]:PORT", spec);
    }
    if ((grc = getaddrinfo(host, port, &hints, &ai)) != 0)
        st = em_cli_fail(2, "serve", "--listen tcp:%s: %s", spec,
                         gai_strerror(grc));
    else if (!is_loopback(ai) && !have_token)
        st = em_cli_fail(2, "serve", "--listen tcp:%s: an address other "
                         "than loopback needs --token-file", spec);
    else
        st = tcp_bind(spec, ai, fd);
    if (ai != NULL)
        freeaddrinfo(ai);
    em_free(copy);
    return st;
}

/* ---- files: token, TLS ---------------------------------------------------- */

/* The whole of a small file, NUL-terminated. */
static char *file_read(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = f != NULL ? em_malloc(max + 1) : NULL;
    size_t n = 0;

    if (buf != NULL) {
        n = fread(buf, 1, max + 1, f);
        if (ferror(f) || n > max) {
            em_free(buf);
            buf = NULL;
            errno = ferror(f) ? EIO : EFBIG;
        } else {
            buf[n] = '\0';
        }
    }
    if (f != NULL)
        fclose(f);
    *len = n;
    return buf;
}

static int token_load(em_server *s, const char *path)
{
    size_t n;
    char *t = file_read(path, TOKEN_MAX, &n);

    if (t == NULL)
        return em_cli_fail(1, "serve", "--token-file %s: %s", path,
                           strerror(errno));
    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r' ||
                     t[n - 1] == ' ' || t[n - 1] == '\t'))
        t[--n] = '\0';
    if (n == 0 || strlen(t) != n) {
        em_free(t);
        return em_cli_fail(1, "serve", "--token-file %s: the token is "
                           "empty or holds a NUL byte", path);
    }
    s->token = t;
    s->token_len = n;
    return 0;
}

/* ---- daemons ------------------------------------------------------------------ */

static struct MHD_Daemon *daemon_start(em_server *s, int fd, char *cert,
                                       char *key)
{
    /* suspend and resume: a streamed answer waits for its producer
    ** without holding the pool thread (serve_stream.c) */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME;

    if (cert != NULL)
        flags |= MHD_USE_TLS;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, em_http_on_request, s,
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_THREAD_POOL_SIZE, s->opts.threads,
        /* the hard stop past the soft limit that answers 503 */
        MHD_OPTION_CONNECTION_LIMIT, s->opts.max_conns + 64,
        /* a connection's memory for its request line, headers and
        ** parameters: the default 32 KiB held fewer than our 256
        ** parameters, and past it libmicrohttpd answered nothing. It is
        ** zeroed between requests, so it is resident: 1,000 idle
        ** connections hold 64 MiB (256 KiB held 256 MiB) */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EM_SERVE_CONN_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, s->opts.idle_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, em_http_on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, em_http_on_connection, s,
        cert != NULL ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
        MHD_OPTION_HTTPS_MEM_KEY, key,
        MHD_OPTION_END);
}

/* Opens one listening socket of SPEC ("unix:PATH" or "tcp:..."). */
static int listen_one(em_server *s, const char *spec, int *fd)
{
    if (strncmp(spec, "unix:", 5) == 0) {
        char *path = em_strdup(spec + 5);
        int st = path != NULL ? listen_unix(path, fd) : 1;
        if (st == 0)
            s->unix_paths[s->nunix++] = path;
        else
            em_free(path);
        return st;
    }
    if (strncmp(spec, "tcp:", 4) == 0)
        return listen_tcp(spec + 4, s->token != NULL, fd);
    return em_cli_fail(2, "serve", "--listen %s: expected unix:PATH or "
                       "tcp:[ADDR:]PORT", spec);
}

static int tls_load(const em_serve_opts *o, char **cert, char **key)
{
    size_t n;

    *cert = *key = NULL;
    if (o->tls_cert == NULL && o->tls_key == NULL)
        return 0;
    if (o->tls_cert == NULL || o->tls_key == NULL)
        return em_cli_fail(2, "serve", "--tls-cert and --tls-key go "
                           "together");
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return em_cli_fail(1, "serve", "this libmicrohttpd has no TLS");
    if ((*cert = file_read(o->tls_cert, 1 << 20, &n)) == NULL)
        return em_cli_fail(1, "serve", "--tls-cert %s: %s", o->tls_cert,
                           strerror(errno));
    if ((*key = file_read(o->tls_key, 1 << 20, &n)) == NULL)
        return em_cli_fail(1, "serve", "--tls-key %s: %s", o->tls_key,
                           strerror(errno));
    return 0;
}

/* Starts a daemon per --listen; 0 or the exit status. */
static int daemons_start(em_server *s)
{
    char *cert = NULL, *key = NULL;
    int st = tls_load(&s->opts, &cert, &key);

    for (size_t i = 0; i < s->opts.nlisten && st == 0; i++) {
        int fd = -1;
        if ((st = listen_one(s, s->opts.listen[i], &fd)) != 0)
            break;
        bool tls = strncmp(s->opts.listen[i], "tcp:", 4) == 0;
        s->daemons[s->ndaemons] = daemon_start(s, fd, tls ? cert : NULL,
                                               key);
        if (s->daemons[s->ndaemons] == NULL) {
            close(fd);
            st = em_cli_fail(1, "serve", "%s: the HTTP server did not "
                             "start (TLS files valid?)", s->opts.listen[i]);
        } else {
            s->ndaemons++;
        }
    }
    em_free(cert);
    em_free(key);
    return st;
}

/* Stops accepting, waits for the requests in flight, then stops. */
static void daemons_stop(em_server *s)
{
    atomic_store(&s->stopping, true);
    for (size_t i = 0; i < s->ndaemons; i++) {
        MHD_socket fd = MHD_quiesce_daemon(s->daemons[i]);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
    for (int i = 0; i < STOP_GRACE_S * 100 && atomic_load(&s->active) > 0;
         i++)
        nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    for (size_t i = 0; i < s->ndaemons; i++)
        MHD_stop_daemon(s->daemons[i]);
    s->ndaemons = 0;
    for (size_t i = 0; i < s->nunix; i++)
        unlink(s->unix_paths[i]);
}

/* Says where daemon I listens; for TCP the bound address and port, so
** that tcp:0 (any free port) tells which one it got. */
static void listen_say(const em_server *s, size_t i)
{
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(s->daemons[i], MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage a;
    socklen_t alen = sizeof a;
    char host[INET6_ADDRSTRLEN + 2];

    if (di == NULL || getsockname(di->listen_fd, (struct sockaddr *)&a,
                                  &alen) != 0 || a.ss_family == AF_UNIX) {
        fprintf(stderr, "ember serve: listening on %s\n", s->opts.listen[i]);
        return;
    }
    em_serve_addr_str((struct sockaddr *)&a, host, sizeof host);
    fprintf(stderr, "ember serve: listening on tcp:%s:%u%s\n", host,
            ntohs(a.ss_family == AF_INET
                  ? ((struct sockaddr_in *)&a)->sin_port
                  : ((struct sockaddr_in6 *)&a)->sin6_port),
            s->opts.tls_cert != NULL ? " (TLS)" : "");
}

/* ---- the command ----------------------------------------------------------------- */

static int serve_option(em_serve_opts *o, int c, const char *arg)
{
    uint64_t n;

    switch (c) {
    case 'd': o->dir = arg; return 0;
    case 'L':
        if (o->nlisten == EM_SERVE_MAX_LISTEN)
            return em_cli_fail(2, "serve", "more than %d --listen",
                               EM_SERVE_MAX_LISTEN);
        o->listen[o->nlisten++] = arg;
        return 0;
    case 'k': o->token_file = arg; return 0;
    case 'C': o->tls_cert = arg; return 0;
    case 'K': o->tls_key = arg; return 0;
    case 'a': o->access_log = arg; return 0;
    case 'S': o->source_path = arg; return 0;
    case 'b':
        if (em_cli_size(arg, &o->max_body) != 0)
            return em_cli_fail(2, "serve", "--max-body %s: expected bytes "
                               "such as 64M", arg);
        return 0;
    case 'c': case 't': case 'i':
        if (em_cli_size(arg, &n) != 0 || n > 1000000)
            return em_cli_fail(2, "serve", "%s %s: expected a number from 1 "
                               "to 1000000", c == 'c' ? "--max-connections"
                               : c == 't' ? "--threads" : "--idle-timeout",
                               arg);
        *(c == 'c' ? &o->max_conns : c == 't' ? &o->threads
          : &o->idle_timeout_s) = (unsigned)n;
        return 0;
    case 'q':                   /* 0: no limit */
        o->query_timeout_ms = 0;
        if (strcmp(arg, "0") != 0 &&
            (em_duration_parse(arg, &o->query_timeout_ms) != EMBER_OK ||
             o->query_timeout_ms <= 0))
            return em_cli_fail(2, "serve", "--query-timeout %s: expected a "
                               "duration such as 30s or 2m, or 0", arg);
        return 0;
    case 'm':
        o->query_max_bytes = 0;
        if (strcmp(arg, "0") != 0 && em_cli_size(arg, &o->query_max_bytes))
            return em_cli_fail(2, "serve", "--query-memory %s: expected "
                               "bytes such as 512M or 1G, or 0", arg);
        return 0;
    case EM_OPT_COMPACT_EVERY:
        return em_compact_every_opt("serve", arg, &o->compact);
    default:
        return em_cli_bad_option("serve", c);
    }
}

static int serve_args(em_serve_opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        { "dir", required_argument, NULL, 'd' },
        { "listen", required_argument, NULL, 'L' },
        { "token-file", required_argument, NULL, 'k' },
        { "tls-cert", required_argument, NULL, 'C' },
        { "tls-key", required_argument, NULL, 'K' },
        { "access-log", required_argument, NULL, 'a' },
        { "max-body", required_argument, NULL, 'b' },
        { "max-connections", required_argument, NULL, 'c' },
        { "threads", required_argument, NULL, 't' },
        { "idle-timeout", required_argument, NULL, 'i' },
        { "query-timeout", required_argument, NULL, 'q' },
        { "query-memory", required_argument, NULL, 'm' },
        { "source-path", required_argument, NULL, 'S' },
        { "compact-every", required_argument, NULL, EM_OPT_COMPACT_EVERY },
        EM_COMPACT_LONGOPTS("compact-"),
        { NULL, 0, NULL, 0 },
    };
    int c, st, li = 0;

    *o = (em_serve_opts){ .max_body = 256u << 20, .max_conns = 2048,
                          .threads = 4, .idle_timeout_s = 120,
                          .access_log = "-",
                          .query_timeout_ms = DEFAULT_QUERY_TIMEOUT_MS,
                          .query_max_bytes = DEFAULT_QUERY_MEMORY };
    em_compact_sched_defaults(&o->compact);
    while ((c = getopt_long(argc, argv, ":d:", longs, &li)) != -1)
        if ((st = c == EM_OPT_COMPACT
                  ? em_compact_opt("serve", longs[li].name, optarg,
                                   &o->compact.compact)
                  : serve_option(o, c, optarg)) != 0)
            return st;
    return em_cli_args("serve", o->dir, argc, argv, 0, 0);
}

/* The access log: stderr, a file appended to, or none. */
static int log_open(em_server *s)
{
    const char *p = s->opts.access_log;

    if (strcmp(p, "off") == 0)
        s->log = NULL;
    else if (strcmp(p, "-") == 0)
        s->log = stderr;
    else if ((s->log = fopen(p, "ae")) == NULL)
        return em_cli_fail(1, "serve", "--access-log %s: %s", p,
                           strerror(errno));
    return 0;
}

/* Room for --max-connections descriptors and some to spare. */
static void fd_limit_raise(unsigned conns)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < conns + 256) {
        rl.rlim_cur = rl.rlim_max < conns + 256 ? rl.rlim_max : conns + 256;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int server_init(em_server *s, int argc, char **argv)
{
    int st = serve_args(&s->opts, argc, argv);
    static char default_listen[4096];

    if (st != 0)
        return st;
    if (s->opts.nlisten == 0) {
        snprintf(default_listen, sizeof default_listen, "unix:%s/%s",
                 s->opts.dir, DEFAULT_UNIX);
        s->opts.listen[s->opts.nlisten++] = default_listen;
    }
    if (em_mhd_load() != EMBER_OK)
        return em_cli_fail(1, "serve", "%s", em_errmsg());
    if (s->opts.token_file != NULL && (st = token_load(s, s->opts.token_file)))
        return st;
    if ((st = log_open(s)) != 0)
        return st;
    s->stats = em_calloc(em_nroutes, sizeof *s->stats);
    if (s->stats == NULL)
        return em_cli_fail(1, "serve", "out of memory");
    fd_limit_raise(s->opts.max_conns);
    pthread_mutex_init(&s->log_lock, NULL);
    s->started_ms = em_cli_now_ms();
    if (em_cli_open("serve", s->opts.dir, 0, &s->db) != EMBER_OK)
        return 1;
    /* before the daemons: their handlers read s->compact unlocked */
    if (s->opts.compact.every_ms > 0)
        return em_compact_sched_start(s->db, &s->opts.compact, "serve", true,
                                      &s->compact);
    return 0;
}

static void server_free(em_server *s)
{
    em_compact_sched_free(s->compact);      /* waits for a run to end */
    if (s->db != NULL && ember_sync(s->db) != EMBER_OK)
        em_cli_fail(1, "serve", "sync: %s", ember_errmsg(s->db));
    ember_close(s->db);
    for (size_t i = 0; i < s->nunix; i++)
        em_free(s->unix_paths[i]);
    if (s->log != NULL && s->log != stderr)
        fclose(s->log);
    em_free(s->token);
    em_free(s->stats);
    em_compact_args_free(&s->opts.compact.compact);
}

int em_cmd_serve(int argc, char **argv)
{
    em_server s = { 0 };
    sigset_t set;
    int sig = 0, st;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    signal(SIGPIPE, SIG_IGN);
    pthread_sigmask(SIG_BLOCK, &set, NULL);     /* inherited by the pools */
    st = server_init(&s, argc, argv);
    if (st == 0)
        st = daemons_start(&s);
    if (st == 0) {
        for (size_t i = 0; i < s.ndaemons; i++)
            listen_say(&s, i);
        sigwait(&set, &sig);
        fprintf(stderr, "ember serve: %s: stopping\n",
                sig == SIGTERM ? "SIGTERM" : "SIGINT");
    }
    em_compact_sched_stop(s.compact);       /* no run starts from here */
    daemons_stop(&s);
    server_free(&s);
    return st;
}
