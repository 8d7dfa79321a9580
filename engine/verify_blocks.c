/*
** engine/verify_blocks.c: `ember verify` of the blocks. Each block the
** catalog names must be there, be the file the catalog recorded (id,
** footer checksum, size) and pass em_block_verify (every checksum, every
** section and chunk decoded). The directory must hold no block file newer
** than every block the database ever made (meta block_seq): such a file
** means the LMDB file went back in time (a lost or reverted commit) and
** the catalog no longer names blocks that hold data.
*/
#include <dirent.h>
#include <stdio.h>

#include "engine/compact.h"

typedef struct vb {
    em_rtxn *r;
    ember_problem_fn fn;
    void *ctx;
    uint64_t *problems;
} vb;

static void vb_problem(vb *v, const char *fmt, ...) EM_PRINTF(2, 3);

static void vb_problem(vb *v, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    ++*v->problems;
    if (v->fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->fn(v->ctx, msg);
}

typedef struct fwd {
    vb *v;
    uint64_t id;
} fwd;

static void forward(void *ctx, const char *problem)
{
    fwd *f = ctx;

    vb_problem(f->v, "block %016llx: %s", (unsigned long long)f->id, problem);
}

static int verify_one(void *ctx, const em_catalog_rec *rec)
{
    vb *v = ctx;
    char path[4200];
    em_block *b = NULL;
    const em_block_info *in;
    fwd f = { v, rec->id };
    int rc;

    em_block_path(v->r->db, rec->id, path, sizeof path);
    if ((rc = em_block_open(path, &b)) != EMBER_OK) {
        vb_problem(v, "block %016llx: %s", (unsigned long long)rec->id,
                   em_errmsg());
        return rc == EMBER_ENOMEM ? rc : EMBER_OK;
    }
    in = em_block_get_info(b);
    if (!em_catalog_agrees(rec, in, true))
        vb_problem(v, "block %016llx: the file is not the block the catalog "
                   "names (id %016llx, footer %08x, %llu bytes; the catalog "
                   "says footer %08x, %llu bytes)",
                   (unsigned long long)rec->id, (unsigned long long)in->id,
                   in->footer_crc, (unsigned long long)in->file_size,
                   rec->footer_crc, (unsigned long long)rec->file_size);
    rc = em_block_verify(b, forward, &f);
    em_block_close(b);
    return rc == EMBER_ENOMEM ? rc : EMBER_OK;
}

/* Block files in the directory past every id the database allocated. */
static int verify_dir(vb *v)
{
    char dir[4200];
    uint64_t seq = 0, id;
    struct dirent *e;
    bool tmp;
    DIR *d;
    int rc = em_meta_get_u64(v->r->txn, v->r->db, "block_seq", &seq);

    snprintf(dir, sizeof dir, "%s/blocks", v->r->db->dir);
    if (rc != EMBER_OK || (d = opendir(dir)) == NULL)
        return rc;
    while ((e = readdir(d)) != NULL)
        if (em_block_file_id(e->d_name, &id, &tmp) && !tmp && id > seq)
            vb_problem(v, "%s/%s: a block newer than every block this "
                       "database made (block_seq %llu): the database went "
                       "back in time and no longer names it", dir,
                       e->d_name, (unsigned long long)seq);
    closedir(d);
    return EMBER_OK;
}

int em_verify_blocks(em_rtxn *r, ember_problem_fn fn, void *ctx,
                     uint64_t *problems)
{
    vb v = { r, fn, ctx, problems };
    int rc = em_catalog_walk(r->txn, r->db, verify_one, &v);

    if (rc == EMBER_ECORRUPT) {     /* a catalog record: say it, go on */
        vb_problem(&v, "%s", em_errmsg());
        rc = EMBER_OK;
    }
    return rc == EMBER_OK ? verify_dir(&v) : rc;
}
