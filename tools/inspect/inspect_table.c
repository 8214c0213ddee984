/*
 * ramforge inspect's scriptable output (see inspect_table.h): the JSON
 * envelope and the page-cache table's columns, as fincore(1) selects them
 * with -o and drops the heading with -n, plus a per-layer grouping.
 */
#include "inspect_table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cli.h"
#include "ramforge/forge/forge.h"

#ifndef RAMFORGE_VERSION
#define RAMFORGE_VERSION "0.0.0"
#endif

int inspect_envelope(json_t *doc, const char *kind)
{
    if (json_object_set_new(doc, "schema_version", json_integer(INSPECT_SCHEMA_VERSION)) < 0 ||
        json_object_set_new(doc, "kind", json_string(kind)) < 0 ||
        json_object_set_new(doc, "ramforge_version", json_string(RAMFORGE_VERSION)) < 0 ||
        json_object_set_new(doc, "llama_cpp_version", json_string(forge_llama_version())) < 0)
        return -ENOMEM;
    return 0;
}

enum column {
    COL_INDEX,
    COL_NAME,
    COL_LAYER,
    COL_TYPE,
    COL_TENSORS,
    COL_RANGE,
    COL_PAGES,
    COL_SIZE,
    COL_RES,
    COL_NONRES,
    COL_UNKNOWN,
    COL_RES_BYTES,
    COL_PERCENT,
    COL_SAMPLED,
    COL_FILE,
    COL_N
};

/* Where a column applies: per tensor, per layer, or both. */
#define PER_TENSOR 1
#define PER_LAYER 2

static const struct {
    const char *name;
    int width; /* negative: left-aligned */
    int where;
    const char *help;
} columns[COL_N] = {
    [COL_INDEX] = {"INDEX", 5, PER_TENSOR, "the tensor's index in the GGUF table"},
    [COL_NAME] = {"NAME", -28, PER_TENSOR | PER_LAYER, "tensor name (with --by-layer: the layer)"},
    [COL_LAYER] = {"LAYER", -12, PER_TENSOR | PER_LAYER, "blk.N, or the tensor's group"},
    [COL_TYPE] = {"TYPE", -6, PER_TENSOR, "ggml type"},
    [COL_TENSORS] = {"TENSORS", 7, PER_LAYER, "tensors in the layer"},
    [COL_RANGE] = {"RANGE", 17, PER_TENSOR, "file page range [first,end)"},
    [COL_PAGES] = {"PAGES", 9, PER_TENSOR | PER_LAYER, "pages of the range(s)"},
    [COL_SIZE] = {"SIZE", 11, PER_TENSOR | PER_LAYER, "logical bytes (GGUF table)"},
    [COL_RES] = {"RES", 9, PER_TENSOR | PER_LAYER, "pages in the page cache"},
    [COL_NONRES] = {"NONRES", 9, PER_TENSOR | PER_LAYER, "pages not in the page cache"},
    [COL_UNKNOWN] = {"UNKNOWN", 9, PER_TENSOR | PER_LAYER, "pages not inspected (budget)"},
    [COL_RES_BYTES] = {"RES_BYTES", 11, PER_TENSOR | PER_LAYER, "RES in bytes"},
    [COL_PERCENT] = {"PERCENT", 8, PER_TENSOR | PER_LAYER, "RES / PAGES"},
    [COL_SAMPLED] = {"SAMPLED", -7, PER_TENSOR, "full, partial or none"},
    [COL_FILE] = {"FILE", -1, PER_TENSOR | PER_LAYER, "the model file"},
};

static const int default_tensor[] = {COL_INDEX,   COL_NAME,   COL_TYPE,    COL_RANGE,
                                     COL_RES,     COL_NONRES, COL_UNKNOWN, COL_RES_BYTES,
                                     COL_PERCENT, COL_SAMPLED};
static const int default_layer[] = {COL_NAME,   COL_TENSORS, COL_PAGES,     COL_RES,
                                    COL_NONRES, COL_UNKNOWN, COL_RES_BYTES, COL_PERCENT};

const char *inspect_table_column_list(void)
{
    return "INDEX, NAME, LAYER, TYPE, TENSORS, RANGE, PAGES, SIZE, RES, NONRES, UNKNOWN, "
           "RES_BYTES, PERCENT, SAMPLED, FILE";
}

void inspect_table_usage(FILE *out)
{
    for (int c = 0; c < COL_N; c++)
        fprintf(out, "                   %-10s%s%s\n", columns[c].name, columns[c].help,
                columns[c].where == PER_TENSOR  ? " (per tensor)"
                : columns[c].where == PER_LAYER ? " (--by-layer)"
                                                : "");
}

static bool add_column(struct inspect_table *t, int id)
{
    if (t->n_columns >= INSPECT_MAX_COLUMNS) {
        cli_usage_error("-o: at most %d columns", INSPECT_MAX_COLUMNS);
        return false;
    }
    t->columns[t->n_columns++] = id;
    return true;
}

bool inspect_table_parse(const char *list, bool by_layer, bool noheadings, bool raw,
                         struct inspect_table *t)
{
    const int *defs = by_layer ? default_layer : default_tensor;
    size_t n_defs = by_layer ? sizeof(default_layer) / sizeof(default_layer[0])
                             : sizeof(default_tensor) / sizeof(default_tensor[0]);
    const int where = by_layer ? PER_LAYER : PER_TENSOR;

    memset(t, 0, sizeof(*t));
    t->by_layer = by_layer;
    t->noheadings = noheadings;
    t->raw = raw;
    if (!list || *list == '+') {
        for (size_t i = 0; i < n_defs; i++)
            t->columns[t->n_columns++] = defs[i];
        if (!list)
            return true;
        list++;
    }
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        int id = -1;
        for (int c = 0; c < COL_N; c++)
            if (strlen(columns[c].name) == len && strncasecmp(p, columns[c].name, len) == 0)
                id = c;
        if (id < 0) {
            cli_usage_error("-o: unknown column '%.*s' (columns: %s)", (int)len, p,
                            inspect_table_column_list());
            return false;
        }
        if (!(columns[id].where & where)) {
            cli_usage_error("-o: column %s does not apply %s", columns[id].name,
                            by_layer ? "with --by-layer" : "without --by-layer");
            return false;
        }
        if (!add_column(t, id))
            return false;
        p += len;
        if (*p == ',')
            p++;
    }
    if (t->n_columns == 0) {
        cli_usage_error("-o: no column given");
        return false;
    }
    return true;
}

/* One row's figures: a tensor's or a layer's (sums over its tensors). */
struct row {
    char name[64];
    char layer[64];
    const struct rf_inventory_entry *e;    /* per tensor; NULL per layer */
    const struct rf_residency_resource *r; /* per tensor; NULL per layer */
    uint64_t tensors, pages, size, res, nonres, unknown;
    bool sampled; /* some page was inspected */
};

/* "blk.N" for blk.N.*, else the name up to its first dot (token_embd, output_norm). */
static void layer_of(const char *name, char *out, size_t len)
{
    size_t n;
    if (strncmp(name, "blk.", 4) == 0)
        n = 4 + strcspn(name + 4, ".");
    else
        n = strcspn(name, ".");
    snprintf(out, len, "%.*s", (int)n, name);
}

static void print_cell(const struct inspect_table *t, int col, const struct row *w,
                       const char *path, uint64_t page_bytes, bool last)
{
    char buf[64];
    const char *s = buf;

    switch (col) {
    case COL_INDEX:
        snprintf(buf, sizeof(buf), "%u", w->e->key.tensor_index);
        break;
    case COL_NAME:
        s = w->name;
        break;
    case COL_LAYER:
        s = w->layer;
        break;
    case COL_TYPE:
        s = w->e->type_name;
        break;
    case COL_TENSORS:
        snprintf(buf, sizeof(buf), "%" PRIu64, w->tensors);
        break;
    case COL_RANGE:
        if (w->r->mapping_index >= 0)
            snprintf(buf, sizeof(buf), "[%" PRIu64 ",%" PRIu64 ")", w->r->pages.first_page,
                     w->r->pages.end_page);
        else
            s = "-";
        break;
    case COL_PAGES:
        snprintf(buf, sizeof(buf), "%" PRIu64, w->pages);
        break;
    case COL_SIZE:
        cli_format_bytes(w->size, t->raw, buf, sizeof(buf));
        break;
    case COL_RES:
        snprintf(buf, sizeof(buf), "%" PRIu64, w->res);
        break;
    case COL_NONRES:
        snprintf(buf, sizeof(buf), "%" PRIu64, w->nonres);
        break;
    case COL_UNKNOWN:
        snprintf(buf, sizeof(buf), "%" PRIu64, w->unknown);
        break;
    case COL_RES_BYTES:
        if (w->sampled)
            cli_format_bytes(w->res * page_bytes, t->raw, buf, sizeof(buf));
        else
            s = "unknown";
        break;
    case COL_PERCENT:
        if (w->sampled && w->pages > 0) {
            uint64_t bp = w->res * 10000 / w->pages; /* basis points, rounded down */
            snprintf(buf, sizeof(buf), "%" PRIu64 ".%02" PRIu64 "%%", bp / 100, bp % 100);
        } else {
            s = "-";
        }
        break;
    case COL_SAMPLED:
        s = rf_residency_sampled_name(w->r->sampled);
        break;
    case COL_FILE:
        s = path;
        break;
    default:
        s = "?";
    }
    int width = columns[col].width;
    if (last && width < 0)
        fputs(s, stdout); /* no trailing blanks */
    else
        printf("%*s", width, s);
}

static void print_row(const struct inspect_table *t, const struct row *w, const char *path,
                      uint64_t page_bytes)
{
    for (size_t i = 0; i < t->n_columns; i++) {
        if (i)
            fputc(' ', stdout);
        print_cell(t, t->columns[i], w, path, page_bytes, i + 1 == t->n_columns);
    }
    fputc('\n', stdout);
}

static void tensor_row(const struct rf_inventory_entry *e, const struct rf_residency_resource *r,
                       struct row *w)
{
    memset(w, 0, sizeof(*w));
    snprintf(w->name, sizeof(w->name), "%s", e->name);
    layer_of(e->name, w->layer, sizeof(w->layer));
    w->e = e;
    w->r = r;
    w->tensors = 1;
    w->pages = r->mapping_index >= 0 ? r->pages.end_page - r->pages.first_page : 0;
    w->size = e->logical_bytes;
    w->res = r->resident_pages;
    w->nonres = r->nonresident_pages;
    w->unknown = r->unknown_pages;
    w->sampled = r->sampled != RF_SAMPLED_NONE;
}

void inspect_table_print(const struct inspect_table *t, const char *path,
                         const struct rf_inventory *inv, const struct rf_residency_snapshot *snap,
                         uint64_t page_bytes)
{
    if (!t->noheadings) {
        for (size_t i = 0; i < t->n_columns; i++) {
            int c = t->columns[i];
            if (i)
                fputc(' ', stdout);
            if (i + 1 == t->n_columns && columns[c].width < 0)
                fputs(columns[c].name, stdout);
            else
                printf("%*s", columns[c].width, columns[c].name);
        }
        fputc('\n', stdout);
    }
    if (!t->by_layer) {
        for (size_t i = 0; i < inv->n; i++) {
            struct row w;
            tensor_row(&inv->entries[i], &snap->resources[i], &w);
            print_row(t, &w, path, page_bytes);
        }
        return;
    }
    /* Layers in the order of their first tensor; sums over their tensors. */
    struct row *layers = calloc(inv->n ? inv->n : 1, sizeof(*layers));
    size_t n_layers = 0;
    if (!layers) {
        cli_error("out of memory");
        return;
    }
    for (size_t i = 0; i < inv->n; i++) {
        struct row w;
        size_t k;
        tensor_row(&inv->entries[i], &snap->resources[i], &w);
        for (k = 0; k < n_layers && strcmp(layers[k].layer, w.layer) != 0; k++)
            ;
        if (k == n_layers) {
            n_layers++;
            memcpy(layers[k].layer, w.layer, sizeof(w.layer));
            memcpy(layers[k].name, w.layer, sizeof(w.layer));
        }
        layers[k].tensors++;
        layers[k].pages += w.pages;
        layers[k].size += w.size;
        layers[k].res += w.res;
        layers[k].nonres += w.nonres;
        layers[k].unknown += w.unknown;
        layers[k].sampled |= w.sampled;
    }
    for (size_t k = 0; k < n_layers; k++)
        print_row(t, &layers[k], path, page_bytes);
    free(layers);
}
