/*
 * Access profiles and prediction history: building one from a dispatch
 * summary, the cold/hot orders it gives an inventory and the versioned JSON
 * document. The per-page prediction counts are prediction.c.
 *
 * Workload: a few hundred tensor names per model and at most a few
 * thousand history entries; a document of a few hundred KiB. The parser
 * treats the text as hostile: a size cap before parsing, every field
 * type-checked and bounded, no name longer than the inventory's field.
 */
#include "ramforge/core/profile.h"
#include "profile_routing.h"
#include "ramforge/core/json_util.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/error.h"

static void say(char *why, size_t why_size, const char *fmt, ...)
{
    if (!why || !why_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
    /* One line: the file's own text (a tensor name, jansson's quote of the bad token) may
       carry control characters; each becomes '?'. */
    for (char *c = why; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

void rf_profile_init(struct rf_profile *p)
{
    memset(p, 0, sizeof(*p));
    p->format_version = RF_PROFILE_FORMAT_VERSION;
    p->max_history = RF_PROFILE_DEFAULT_HISTORY;
}

void rf_profile_free(struct rf_profile *p)
{
    if (!p)
        return;
    size_t keep = p->max_history;
    free(p->tensors);
    free(p->history);
    rf_routing_free(&p->routing);
    rf_profile_init(p);
    if (keep)
        p->max_history = keep;
}

/* ---- identity ----------------------------------------------------------- */

int rf_profile_identity(const void *header, size_t header_len, uint64_t file_size_bytes,
                        char out[RF_PROFILE_IDENTITY_MAX])
{
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE], size_le[8];

    if (!out || (!header && header_len > 0))
        return -EINVAL;
    sha256_init(&ctx);
    if (header_len)
        sha256_update(&ctx, header_len, header);
    for (int i = 0; i < 8; i++)
        size_le[i] = (uint8_t)(file_size_bytes >> (8 * i));
    sha256_update(&ctx, sizeof(size_le), size_le);
    sha256_digest(&ctx, sizeof(digest), digest);
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

/* "sha256:" and exactly 64 lowercase hex digits. */
static bool identity_valid(const char *s)
{
    if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
        return false;
    for (const char *c = s + 7; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* ---- building ----------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const struct rf_profile_tensor *)a)->name,
                  ((const struct rf_profile_tensor *)b)->name);
}

/* Sorts t by name and drops every name that occurs more than once; the new count. */
static size_t sort_unique(struct rf_profile_tensor *t, size_t n)
{
    size_t w = 0;
    qsort(t, n, sizeof(*t), cmp_tensor_name);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && strcmp(t[i].name, t[j].name) == 0)
            j++;
        if (j == i + 1)
            t[w++] = t[i];
        i = j;
    }
    return w;
}

int rf_profile_update(struct rf_profile *p, const struct rf_inventory *inv,
                      const struct rf_dispatch_summary *d, const char *identity,
                      uint64_t file_size_bytes, char *why, size_t why_size)
{
    if (!p || !inv || !d || !identity_valid(identity) || d->n_tensors != inv->n)
        return -EINVAL;
    if (!d->complete) {
        say(why, why_size,
            "the dispatch trace is incomplete (%" PRIu64 " events dropped): no profile",
            d->dropped_events);
        return -ENODATA;
    }
    if (d->unattributed_weight_refs > 0) {
        say(why, why_size,
            "%" PRIu64 " weight source references were not attributed to a unique tensor "
            "name: no profile",
            d->unattributed_weight_refs);
        return -ENODATA;
    }
    if (d->events == 0) {
        say(why, why_size, "the dispatch trace has no events: no profile");
        return -ENODATA;
    }
    if (inv->n > RF_PROFILE_MAX_TENSORS) {
        say(why, why_size, "%zu tensors: over the profile bound of %u", inv->n,
            RF_PROFILE_MAX_TENSORS);
        return -E2BIG;
    }
    struct rf_profile_tensor *t = calloc(inv->n ? inv->n : 1, sizeof(*t));
    size_t n = 0;
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < inv->n; i++) {
        const char *name = inv->entries[i].name;
        if (strnlen(name, RF_NAME_MAX) == RF_NAME_MAX || !name[0])
            continue;
        memcpy(t[n].name, name, strlen(name) + 1);
        t[n].first_rank = d->tensors[i].first_order;
        t[n].accesses = d->tensors[i].references;
        n++;
    }
    n = sort_unique(t, n);
    free(p->tensors);
    p->tensors = t;
    p->n_tensors = n;
    memcpy(p->identity, identity, strlen(identity) + 1);
    p->file_size_bytes = file_size_bytes;
    p->operations++;
    return 0;
}

bool rf_profile_matches(const struct rf_profile *p, const char *identity, uint64_t file_size_bytes,
                        char *why, size_t why_size)
{
    if (!p || !identity)
        return false;
    if (p->format_version != RF_PROFILE_FORMAT_VERSION) {
        say(why, why_size, "format version %" PRIu32 ", this build reads %d", p->format_version,
            RF_PROFILE_FORMAT_VERSION);
        return false;
    }
    if (strcmp(p->identity, identity) != 0) {
        say(why, why_size, "made for another model (identity %.23s..., this model %.23s...)",
            p->identity, identity);
        return false;
    }
    if (p->file_size_bytes != file_size_bytes) {
        say(why, why_size, "made for a file of %" PRIu64 " bytes, this model's file has %" PRIu64,
            p->file_size_bytes, file_size_bytes);
        return false;
    }
    return true;
}

/* ---- orders ------------------------------------------------------------- */

struct ranked {
    uint32_t rank; /* first_rank; RF_PROFILE_NEVER */
    size_t entry;  /* inventory position */
};

static int cmp_ranked(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* The profile entry of name, or NULL (p->tensors is sorted by name). */
static const struct rf_profile_tensor *find_name(const struct rf_profile *p, const char *name)
{
    struct rf_profile_tensor key;
    size_t len = strnlen(name, RF_NAME_MAX);
    if (len == RF_NAME_MAX || !p->n_tensors)
        return NULL;
    memcpy(key.name, name, len + 1);
    return bsearch(&key, p->tensors, p->n_tensors, sizeof(key), cmp_tensor_name);
}

/* Whether inv carries name exactly once. */
static bool inv_unique(const struct rf_inventory *inv, const char *name, size_t at)
{
    for (size_t i = 0; i < inv->n; i++)
        if (i != at && strncmp(inv->entries[i].name, name, RF_NAME_MAX) == 0)
            return false;
    return true;
}

int rf_profile_orders(const struct rf_profile *p, const struct rf_inventory *inv, uint32_t **cold,
                      size_t *n_cold, uint32_t **hot, size_t *n_hot, size_t *unmatched)
{
    if (!p || !inv || (cold && !n_cold) || (hot && !n_hot))
        return -EINVAL;
    struct ranked *r = calloc(inv->n ? inv->n : 1, sizeof(*r));
    uint32_t *c = calloc(inv->n ? inv->n : 1, sizeof(uint32_t));
    uint32_t *h = calloc(inv->n ? inv->n : 1, sizeof(uint32_t));
    size_t n = 0, matched = 0, nc = 0, nh = 0;
    if (!r || !c || !h) {
        free(r);
        free(c);
        free(h);
        return -ENOMEM;
    }
    /* Names the inventory carries once; a sorted name index would be O(n log n), but
       profiles are a few hundred names and this runs once per operation. */
    for (size_t i = 0; i < inv->n; i++) {
        const struct rf_profile_tensor *t = find_name(p, inv->entries[i].name);
        if (!t || !inv_unique(inv, inv->entries[i].name, i))
            continue;
        matched++;
        r[n].rank = t->accesses ? t->first_rank : RF_PROFILE_NEVER;
        r[n].entry = i;
        n++;
    }
    qsort(r, n, sizeof(*r), cmp_ranked);
    /* cold: never used (inventory order), then latest first use first */
    for (size_t k = 0; k < n; k++)
        if (r[k].rank == RF_PROFILE_NEVER)
            c[nc++] = inv->entries[r[k].entry].key.tensor_index;
    for (size_t k = n; k-- > 0;)
        if (r[k].rank != RF_PROFILE_NEVER)
            c[nc++] = inv->entries[r[k].entry].key.tensor_index;
    for (size_t k = 0; k < n; k++)
        if (r[k].rank != RF_PROFILE_NEVER)
            h[nh++] = inv->entries[r[k].entry].key.tensor_index;
    free(r);
    if (unmatched)
        *unmatched = p->n_tensors > matched ? p->n_tensors - matched : 0;
    if (cold) {
        *cold = c;
        *n_cold = nc;
    } else {
        free(c);
    }
    if (hot) {
        *hot = h;
        *n_hot = nh;
    } else {
        free(h);
    }
    return 0;
}

/* ---- history ------------------------------------------------------------ */

int rf_profile_history_push(struct rf_profile *p, const struct rf_prediction *e)
{
    if (!p || !e || p->max_history == 0)
        return -EINVAL;
    if (p->n_history >= p->max_history) {
        size_t drop = p->n_history - p->max_history + 1;
        memmove(p->history, p->history + drop, (p->n_history - drop) * sizeof(*e));
        p->n_history -= drop;
    } else {
        struct rf_prediction *h = realloc(p->history, (p->n_history + 1) * sizeof(*e));
        if (!h)
            return -ENOMEM;
        p->history = h;
    }
    p->history[p->n_history++] = *e;
    return 0;
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *prediction_json(const struct rf_prediction *e)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "operation", rf_json_u64(true, e->operation));
    json_object_set_new(o, "identity", rf_json_str(e->identity));
    json_object_set_new(o, "selected_bytes", rf_json_u64(true, e->selected_bytes));
    json_object_set_new(o, "accepted_bytes",
                        e->has_accepted ? rf_json_u64(true, e->accepted_bytes) : json_null());
    json_object_set_new(o, "mapping_delta_bytes",
                        e->has_mapping_delta ? json_integer(e->mapping_delta_bytes) : json_null());
    if (e->has_pages) {
        json_object_set_new(o, "page_bytes", rf_json_u64(true, e->page_bytes));
        json_object_set_new(o, "hit_pages", rf_json_u64(true, e->hit_pages));
        json_object_set_new(o, "miss_pages", rf_json_u64(true, e->miss_pages));
        json_object_set_new(o, "wasted_pages", rf_json_u64(true, e->wasted_pages));
        json_object_set_new(o, "unknown_pages", rf_json_u64(true, e->unknown_pages));
        json_object_set_new(o, "used_pages", rf_json_u64(true, e->used_pages));
        json_object_set_new(o, "resident_staged_pages",
                            rf_json_u64(true, e->resident_staged_pages));
    } else {
        const char *k[] = {"page_bytes",    "hit_pages",  "miss_pages",           "wasted_pages",
                           "unknown_pages", "used_pages", "resident_staged_pages"};
        for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
            json_object_set_new(o, k[i], json_null());
    }
    return o;
}

int rf_profile_to_text(const struct rf_profile *p, char **out)
{
    if (!p || !out)
        return -EINVAL;
    *out = NULL;
    json_t *doc = json_object(), *tensors = json_array(), *hist = json_array();
    int rc = -ENOMEM;
    if (!doc || !tensors || !hist)
        goto out;
    json_object_set_new(doc, "kind", json_string(RF_PROFILE_KIND));
    json_object_set_new(doc, "format_version", json_integer(RF_PROFILE_FORMAT_VERSION));
    json_object_set_new(doc, "identity", rf_json_str(p->identity));
    json_object_set_new(doc, "file_size_bytes", rf_json_u64(true, p->file_size_bytes));
    json_object_set_new(doc, "operations", rf_json_u64(true, p->operations));
    for (size_t i = 0; i < p->n_tensors; i++) {
        const struct rf_profile_tensor *t = &p->tensors[i];
        json_error_t e;
        /* The name is the key a later run matches: one that is not UTF-8 is refused, not
           replaced (-RF_EJSON; llama.cpp loads no such model today). */
        json_t *o = json_pack_ex(&e, 0, "{s:s, s:o, s:o}", "name", t->name, "first_rank",
                                 t->first_rank == RF_PROFILE_NEVER ? json_null()
                                                                   : json_integer(t->first_rank),
                                 "accesses", rf_json_u64(true, t->accesses));
        if (!o)
            rc = json_error_code(&e) == json_error_out_of_memory ? -ENOMEM : -RF_EJSON;
        if (!o || json_array_append_new(tensors, o) < 0)
            goto out;
    }
    for (size_t i = 0; i < p->n_history; i++) {
        json_t *o = prediction_json(&p->history[i]);
        if (!o || json_array_append_new(hist, o) < 0)
            goto out;
    }
    json_object_set(doc, "tensors", tensors);
    json_object_set(doc, "history", hist);
    json_t *routing = rf_profile_routing_json(&p->routing);
    if (!routing || json_object_set_new(doc, "routing", routing) < 0)
        goto out;
    *out = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
    rc = *out ? 0 : -ENOMEM;
out:
    json_decref(tensors);
    json_decref(hist);
    json_decref(doc);
    return rc;
}

/* An integer in [0, max]; false otherwise. */
static bool get_u64(json_t *o, const char *key, uint64_t max, uint64_t *v)
{
    json_t *x = json_object_get(o, key);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || (uint64_t)json_integer_value(x) > max)
        return false;
    *v = (uint64_t)json_integer_value(x);
    return true;
}

/* An integer in [0, max] or null (*has false). */
static bool get_opt_u64(json_t *o, const char *key, uint64_t max, bool *has, uint64_t *v)
{
    json_t *x = json_object_get(o, key);
    *has = false;
    if (json_is_null(x))
        return true;
    *has = true;
    return get_u64(o, key, max, v);
}

static int parse_tensor(json_t *o, struct rf_profile_tensor *t, char *why, size_t why_size,
                        size_t i)
{
    json_t *name = json_object_get(o, "name"), *rank = json_object_get(o, "first_rank");
    if (!json_is_object(o) || !json_is_string(name) || json_string_length(name) == 0 ||
        json_string_length(name) >= RF_NAME_MAX ||
        strlen(json_string_value(name)) != json_string_length(name)) {
        say(why, why_size, "tensor %zu: the name is missing, empty, too long or has a NUL", i);
        return -EBADMSG;
    }
    memcpy(t->name, json_string_value(name), json_string_length(name) + 1);
    uint64_t v;
    if (json_is_null(rank)) {
        t->first_rank = RF_PROFILE_NEVER;
    } else if (get_u64(o, "first_rank", RF_PROFILE_MAX_TENSORS - 1, &v)) {
        t->first_rank = (uint32_t)v;
    } else {
        say(why, why_size, "tensor %zu: first_rank is not null or an integer below %u", i,
            RF_PROFILE_MAX_TENSORS);
        return -EBADMSG;
    }
    if (!get_u64(o, "accesses", INT64_MAX, &t->accesses)) {
        say(why, why_size, "tensor %zu: accesses is not a non-negative integer", i);
        return -EBADMSG;
    }
    return 0;
}

static int parse_prediction(json_t *o, struct rf_prediction *e, char *why, size_t why_size,
                            size_t i)
{
    json_t *id = json_object_get(o, "identity"), *delta = json_object_get(o, "mapping_delta_bytes");
    bool ok = json_is_object(o) && json_is_string(id) && identity_valid(json_string_value(id));
    bool has_pages = false;
    uint64_t pb = 0;
    memset(e, 0, sizeof(*e));
    if (ok)
        memcpy(e->identity, json_string_value(id), strlen(json_string_value(id)) + 1);
    ok = ok && get_u64(o, "operation", INT64_MAX, &e->operation) &&
         get_u64(o, "selected_bytes", INT64_MAX, &e->selected_bytes) &&
         get_opt_u64(o, "accepted_bytes", INT64_MAX, &e->has_accepted, &e->accepted_bytes) &&
         (json_is_null(delta) || json_is_integer(delta)) &&
         get_opt_u64(o, "page_bytes", UINT32_MAX, &has_pages, &pb);
    if (ok && json_is_integer(delta)) {
        e->has_mapping_delta = true;
        e->mapping_delta_bytes = json_integer_value(delta);
    }
    if (ok && has_pages) {
        e->has_pages = true;
        e->page_bytes = pb;
        ok = pb > 0 && get_u64(o, "hit_pages", INT64_MAX, &e->hit_pages) &&
             get_u64(o, "miss_pages", INT64_MAX, &e->miss_pages) &&
             get_u64(o, "wasted_pages", INT64_MAX, &e->wasted_pages) &&
             get_u64(o, "unknown_pages", INT64_MAX, &e->unknown_pages) &&
             get_u64(o, "used_pages", INT64_MAX, &e->used_pages) &&
             get_u64(o, "resident_staged_pages", INT64_MAX, &e->resident_staged_pages) &&
             e->resident_staged_pages <= e->hit_pages + e->wasted_pages &&
             e->hit_pages <= e->used_pages && e->miss_pages + e->unknown_pages <= e->used_pages;
    }
    if (!ok) {
        say(why, why_size, "history entry %zu is malformed", i);
        return -EBADMSG;
    }
    return 0;
}

int rf_profile_parse(const char *text, size_t len, size_t max_history, struct rf_profile *out,
                     char *why, size_t why_size)
{
    json_error_t jerr;
    json_t *doc = NULL, *x;
    int rc = -EBADMSG;
    uint64_t v;

    if (!out)
        return -EINVAL;
    rf_profile_init(out);
    out->max_history = max_history ? max_history : RF_PROFILE_DEFAULT_HISTORY;
    if (out->max_history > RF_PROFILE_MAX_HISTORY)
        out->max_history = RF_PROFILE_MAX_HISTORY;
    if (!text && len > 0)
        return -EINVAL;
    if (len > RF_PROFILE_MAX_FILE_BYTES) {
        say(why, why_size, "%zu bytes: larger than the %u-byte limit of a profile", len,
            RF_PROFILE_MAX_FILE_BYTES);
        return -EFBIG;
    }
    doc = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        say(why, why_size, "not a JSON document (line %d: %s)", jerr.line, jerr.text);
        return -EBADMSG;
    }
    x = json_object_get(doc, "kind");
    if (!json_is_object(doc) || !json_is_string(x) ||
        strcmp(json_string_value(x), RF_PROFILE_KIND) != 0) {
        say(why, why_size, "not an access profile (kind is not \"%s\")", RF_PROFILE_KIND);
        goto out;
    }
    if (!get_u64(doc, "format_version", UINT32_MAX, &v)) {
        say(why, why_size, "format_version is missing or not an integer");
        goto out;
    }
    if (v != RF_PROFILE_FORMAT_VERSION) {
        say(why, why_size, "format version %" PRIu64 ", this build reads version %d", v,
            RF_PROFILE_FORMAT_VERSION);
        rc = -EPROTO;
        goto out;
    }
    x = json_object_get(doc, "identity");
    if (!json_is_string(x) || !identity_valid(json_string_value(x))) {
        say(why, why_size, "identity is not \"sha256:\" and 64 hex digits");
        goto out;
    }
    memcpy(out->identity, json_string_value(x), strlen(json_string_value(x)) + 1);
    if (!get_u64(doc, "file_size_bytes", INT64_MAX, &out->file_size_bytes) ||
        !get_u64(doc, "operations", INT64_MAX, &out->operations)) {
        say(why, why_size, "file_size_bytes or operations is not a non-negative integer");
        goto out;
    }
    json_t *tensors = json_object_get(doc, "tensors"), *hist = json_object_get(doc, "history");
    if (!json_is_array(tensors) || !json_is_array(hist)) {
        say(why, why_size, "tensors or history is not an array");
        goto out;
    }
    if (json_array_size(tensors) > RF_PROFILE_MAX_TENSORS ||
        json_array_size(hist) > RF_PROFILE_MAX_HISTORY) {
        say(why, why_size, "%zu tensors and %zu history entries: over the bounds of %u and %u",
            json_array_size(tensors), json_array_size(hist), RF_PROFILE_MAX_TENSORS,
            RF_PROFILE_MAX_HISTORY);
        rc = -E2BIG;
        goto out;
    }
    size_t nt = json_array_size(tensors), nh = json_array_size(hist);
    out->tensors = calloc(nt ? nt : 1, sizeof(*out->tensors));
    out->history = calloc(nh ? nh : 1, sizeof(*out->history));
    if (!out->tensors || !out->history) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nt; i++)
        if ((rc = parse_tensor(json_array_get(tensors, i), &out->tensors[i], why, why_size, i)) < 0)
            goto out;
    out->n_tensors = nt;
    qsort(out->tensors, nt, sizeof(*out->tensors), cmp_tensor_name);
    for (size_t i = 1; i < nt; i++) {
        if (strcmp(out->tensors[i - 1].name, out->tensors[i].name) == 0) {
            say(why, why_size, "tensor name \"%s\" appears twice", out->tensors[i].name);
            rc = -EBADMSG;
            goto out;
        }
    }
    for (size_t i = 0; i < nh; i++) {
        struct rf_prediction e;
        if ((rc = parse_prediction(json_array_get(hist, i), &e, why, why_size, i)) < 0)
            goto out;
        if (strcmp(e.identity, out->identity) == 0) /* identity-validated */
            out->history[out->n_history++] = e;
    }
    if (out->n_history > out->max_history) {
        size_t drop = out->n_history - out->max_history;
        memmove(out->history, out->history + drop, out->max_history * sizeof(*out->history));
        out->n_history = out->max_history;
    }
    rc = rf_profile_routing_parse(json_object_get(doc, "routing"), &out->routing, why, why_size);
out:
    json_decref(doc);
    if (rc < 0)
        rf_profile_free(out);
    return rc;
}
