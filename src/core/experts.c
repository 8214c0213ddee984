/*
 * The experts of a mixture-of-experts model (experts.h): routed expert
 * tensors found by name in the inventory, split into per-expert slices
 * (byte ranges and their pages), the dense and routed bytes, and the
 * file pages one token reads.
 *
 * Expected sizes: a model of tens of layers has a few routed tensors per
 * layer (gate, up, down) of tens to hundreds of experts; slices are
 * computed on demand, not stored.
 */
#include "ramforge/core/experts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/admission.h"

bool rf_expert_tensor_name(const char *name)
{
    if (rf_tensor_layer_of(name) < 0)
        return false;
    const char *kind = strchr(name + 4, '.') + 1; /* after "blk.<N>." */
    const char *dot = strchr(kind, '.');
    static const char suffix[] = "_exps";
    const size_t n = sizeof(suffix) - 1;

    if (strncmp(kind, "ffn_", 4) != 0 || !dot || (size_t)(dot - kind) < 4 + n)
        return false;
    return memcmp(dot - n, suffix, n) == 0;
}

int rf_expert_slice_of(uint64_t tensor_offset_bytes, uint64_t slice_bytes, uint32_t expert,
                       uint64_t page_bytes, struct rf_expert_slice *out)
{
    uint64_t off, end;

    if (!out || !page_bytes || (page_bytes & (page_bytes - 1)))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (__builtin_mul_overflow((uint64_t)expert, slice_bytes, &off) ||
        __builtin_add_overflow(off, tensor_offset_bytes, &off) ||
        __builtin_add_overflow(off, slice_bytes, &end))
        return -EOVERFLOW;
    int rc = rf_page_range_outward(off, slice_bytes, page_bytes, &out->pages);
    if (rc < 0)
        return rc;
    out->expert = expert;
    out->file_offset_bytes = off;
    out->bytes = slice_bytes;
    if (!slice_bytes)
        return 0;
    out->shared_first = off % page_bytes != 0;
    out->shared_last = end % page_bytes != 0;
    uint64_t pages = (uint64_t)out->shared_first + (uint64_t)out->shared_last;
    if (pages == 2 && rf_page_range_pages(out->pages) == 1)
        pages = 1; /* both edges in the one page */
    out->shared_page_bytes = pages * page_bytes;
    return 0;
}

void rf_expert_map_init(struct rf_expert_map *m)
{
    memset(m, 0, sizeof(*m));
}

void rf_expert_map_free(struct rf_expert_map *m)
{
    if (!m)
        return;
    free(m->tensors);
    rf_expert_map_init(m);
}

/* Distinct pages two neighbouring slices of t share: each interior edge off a page boundary. */
static uint64_t interior_shared_pages(const struct rf_expert_tensor *t, uint32_t n_expert,
                                      uint64_t page_bytes)
{
    uint64_t pages = 0, last = UINT64_MAX;

    for (uint32_t e = 1; e < n_expert; e++) {
        uint64_t edge = t->file_offset_bytes + (uint64_t)e * t->slice_bytes; /* checked by build */
        uint64_t page = edge / page_bytes;
        if (edge % page_bytes && page != last) {
            pages++;
            last = page;
        }
    }
    return pages;
}

/* Whether e is a routed expert tensor the map can slice into n_expert slices. */
static bool sliceable(const struct rf_inventory_entry *e, uint32_t n_expert)
{
    return n_expert && e->logical_bytes % n_expert == 0 && rf_expert_tensor_name(e->name);
}

int rf_expert_map_build(const struct rf_inventory *inv, uint32_t n_expert, uint32_t n_expert_used,
                        struct rf_expert_map *out)
{
    struct rf_expert_map m;
    size_t n = 0;

    if (!inv || !out || (inv->n && !inv->entries) || n_expert_used > n_expert || !inv->page_bytes)
        return -EINVAL;
    rf_expert_map_init(&m);
    m.n_expert = n_expert;
    m.n_expert_used = n_expert_used;
    for (size_t i = 0; i < inv->n; i++)
        n += sliceable(&inv->entries[i], n_expert);
    if (n && !(m.tensors = calloc(n, sizeof(*m.tensors))))
        return -ENOMEM;
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_inventory_entry *e = &inv->entries[i];
        uint64_t *sum = sliceable(e, n_expert) ? &m.routed_bytes : &m.dense_bytes;
        uint64_t end;

        if (__builtin_add_overflow(*sum, e->logical_bytes, sum) ||
            __builtin_add_overflow(e->file_offset_bytes, e->logical_bytes, &end))
            goto overflow;
        if (sum == &m.dense_bytes)
            continue;
        struct rf_expert_tensor *t = &m.tensors[m.n++];
        t->tensor_index = e->key.tensor_index;
        t->layer = rf_tensor_layer_of(e->name);
        t->file_offset_bytes = e->file_offset_bytes;
        t->slice_bytes = e->logical_bytes / n_expert;
        t->file_read = e->file_backed && e->access == RF_ACCESS_FILE_BACKED;
        t->edge_shared_pages = interior_shared_pages(t, n_expert, inv->page_bytes);
        uint64_t bytes;
        if (__builtin_mul_overflow(t->edge_shared_pages, inv->page_bytes, &bytes) ||
            __builtin_add_overflow(m.edge_shared_bytes, bytes, &m.edge_shared_bytes))
            goto overflow;
    }
    if (rf_expert_share(m.routed_bytes, n_expert_used, n_expert, &m.token_routed_bytes) < 0)
        goto overflow;
    rf_expert_map_free(out);
    *out = m;
    return 0;
overflow:
    free(m.tensors);
    return -EOVERFLOW;
}

int rf_expert_share(uint64_t routed, uint32_t k, uint32_t n, uint64_t *out)
{
    if (!out || k > n)
        return -EINVAL;
    *out = 0;
    if (!n)
        return 0;
    /* routed / n * k + the remainder's share, rounded up: no 128-bit product needed */
    uint64_t q = routed / n, r = routed % n, v;
    if (__builtin_mul_overflow(q, (uint64_t)k, &v) ||
        __builtin_add_overflow(v, (r * k + n - 1) / n, &v))
        return -EOVERFLOW;
    *out = v;
    return 0;
}

uint32_t rf_expert_map_layers(const struct rf_expert_map *m)
{
    uint32_t n = 0;
    for (size_t t = 0; m && t < m->n; t++) {
        bool seen = m->tensors[t].layer < 0;
        for (size_t u = 0; u < t && !seen; u++) /* tens to hundreds of tensors */
            seen = m->tensors[u].layer == m->tensors[t].layer;
        n += !seen;
    }
    return n;
}

/* rf_admission_read_bytes's filter: the entries of ud's (a map's) dense part. */
static bool is_dense(const struct rf_inventory_entry *e, void *ud)
{
    const struct rf_expert_map *m = ud;
    return !sliceable(e, m->n_expert);
}

int rf_expert_token_read(const struct rf_inventory *inv, const struct rf_expert_map *m,
                         uint64_t *dense_bytes, uint64_t *routed_bytes, uint64_t *out)
{
    uint64_t all, d, r;
    int rc;

    if (!m || !dense_bytes || !routed_bytes || !out)
        return -EINVAL;
    if ((rc = rf_admission_read_bytes(inv, NULL, NULL, &all)) < 0 ||
        (rc = rf_admission_read_bytes(inv, is_dense, (void *)m, &d)) < 0)
        return rc;
    /* the routed tensors' pages no dense weight covers, k/n of them */
    if ((rc = rf_expert_share(all - d, m->n_expert_used, m->n_expert, &r)) < 0)
        return rc;
    if (__builtin_add_overflow(d, r, out))
        return -EOVERFLOW;
    *dense_bytes = d;
    *routed_bytes = r;
    return 0;
}
