/*
** repl/serve_mhd.h: libmicrohttpd opened when the server starts rather than
** linked (engine/dl.c says why). Included after <microhttpd.h>: each MHD_*
** function the server calls is a pointer of em_mhd, filled by
** em_mhd_load, under its own name, so that the calls read as
** libmicrohttpd's. A function added to the server's calls goes in the
** list and gets its #define below.
*/
#ifndef EM_SERVE_MHD_H
#define EM_SERVE_MHD_H

#include <microhttpd.h>

#define EM_MHD_FUNCS(X)                                                    \
    X(MHD_add_connection) X(MHD_add_response_header)                       \
    X(MHD_create_post_processor)                                           \
    X(MHD_create_response_from_buffer_with_free_callback)                 \
    X(MHD_create_response_from_callback) X(MHD_destroy_post_processor)    \
    X(MHD_destroy_response) X(MHD_get_connection_info)                     \
    X(MHD_get_connection_values) X(MHD_get_daemon_info)                    \
    X(MHD_is_feature_supported) X(MHD_lookup_connection_value)             \
    X(MHD_post_process) X(MHD_queue_response) X(MHD_quiesce_daemon)        \
    X(MHD_resume_connection) X(MHD_run) X(MHD_start_daemon)                \
    X(MHD_stop_daemon) X(MHD_suspend_connection)

/* The pointers, one per function of the list, in its order. */
typedef struct em_mhd_table {
#define EM_MHD_FIELD(f) __typeof__(&f) f;
    EM_MHD_FUNCS(EM_MHD_FIELD)
#undef EM_MHD_FIELD
} em_mhd_table;

extern em_mhd_table em_mhd;

/* Opens libmicrohttpd once; EMBER_OK, or EMBER_ENOTFOUND with a message
** naming the library and the package that installs it. */
int em_mhd_load(void);

/* A name's use inside its own #define is not expanded again: each reads
** the field of the same name. */
#define MHD_add_connection (em_mhd.MHD_add_connection)
#define MHD_add_response_header (em_mhd.MHD_add_response_header)
#define MHD_create_post_processor (em_mhd.MHD_create_post_processor)
#define MHD_create_response_from_buffer_with_free_callback \
    (em_mhd.MHD_create_response_from_buffer_with_free_callback)
#define MHD_create_response_from_callback \
    (em_mhd.MHD_create_response_from_callback)
#define MHD_destroy_post_processor (em_mhd.MHD_destroy_post_processor)
#define MHD_destroy_response (em_mhd.MHD_destroy_response)
#define MHD_get_connection_info (em_mhd.MHD_get_connection_info)
#define MHD_get_connection_values (em_mhd.MHD_get_connection_values)
#define MHD_get_daemon_info (em_mhd.MHD_get_daemon_info)
#define MHD_is_feature_supported (em_mhd.MHD_is_feature_supported)
#define MHD_lookup_connection_value (em_mhd.MHD_lookup_connection_value)
#define MHD_post_process (em_mhd.MHD_post_process)
#define MHD_queue_response (em_mhd.MHD_queue_response)
#define MHD_quiesce_daemon (em_mhd.MHD_quiesce_daemon)
#define MHD_resume_connection (em_mhd.MHD_resume_connection)
#define MHD_run (em_mhd.MHD_run)
#define MHD_start_daemon (em_mhd.MHD_start_daemon)
#define MHD_stop_daemon (em_mhd.MHD_stop_daemon)
#define MHD_suspend_connection (em_mhd.MHD_suspend_connection)

#endif
