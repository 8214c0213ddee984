/*
 * The residency picture (ramforge/core/residency_svg.h): rows of layers,
 * columns of tensor kinds, one panel per boundary, written as plain SVG
 * text with open_memstream. Expected input: a few hundred to a few
 * thousand tensors and at most RF_SVG_MAX_BOUNDARIES snapshots; the
 * output is a few hundred KiB at most.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/report_json.h"
#include "ramforge/core/residency_svg.h"

/* Geometry, in SVG user units (px). */
#define CELL_W 16
#define CELL_H 11
#define LABEL_W 78   /* row labels left of a panel's cells */
#define HEADER_H 74  /* panel title, source and the rotated kind labels */
#define TOP_H 40     /* the picture's title and subtitle */
#define PANEL_GAP 28 /* between panels */
#define LEGEND_H 84
#define MARGIN 12
#define PANEL_W (LABEL_W + RF_SVG_N_KINDS * CELL_W)

static const char *const kind_names[RF_SVG_N_KINDS] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "norms", "other",
};

const char *rf_svg_kind_name(enum rf_svg_kind k)
{
    return (unsigned)k < RF_SVG_N_KINDS ? kind_names[k] : NULL;
}

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* The kind of "<kind>[.suffix]" (len bytes of kind). */
static enum rf_svg_kind kind_of(const char *kind, size_t len)
{
    for (int k = 0; k < RF_SVG_NORMS; k++)
        if (strlen(kind_names[k]) == len && strncmp(kind, kind_names[k], len) == 0)
            return (enum rf_svg_kind)k;
    for (size_t i = 0; i + 4 <= len; i++)
        if (strncmp(kind + i, "norm", 4) == 0)
            return RF_SVG_NORMS;
    return RF_SVG_OTHER;
}

struct rf_svg_place rf_residency_svg_place(const char *name)
{
    struct rf_svg_place p = {.group = RF_SVG_ROW_OTHER, .layer = 0, .kind = RF_SVG_OTHER};
    if (!name)
        return p;
    if (has_prefix(name, "blk.")) { /* a layer's, or other when its N is not one */
        int32_t n = rf_tensor_layer_of(name);
        if (n >= 0 && (uint64_t)n <= RF_SVG_MAX_LAYER) {
            const char *kind = strchr(name + 4, '.') + 1, *dot = strchr(kind, '.');
            p.group = RF_SVG_ROW_LAYER;
            p.layer = (uint32_t)n;
            p.kind = kind_of(kind, dot ? (size_t)(dot - kind) : strlen(kind));
        }
        return p;
    }
    const char *dot = strchr(name, '.');
    size_t stem = dot ? (size_t)(dot - name) : strlen(name);
    if (has_prefix(name, "token_embd") || has_prefix(name, "position_embd") ||
        has_prefix(name, "token_types"))
        p.group = RF_SVG_ROW_EMBEDDINGS;
    else if (has_prefix(name, "output"))
        p.group = RF_SVG_ROW_OUTPUT;
    else
        return p;
    p.kind = kind_of(name, stem) == RF_SVG_NORMS ? RF_SVG_NORMS : RF_SVG_OTHER;
    return p;
}

/* A row's sort key: embeddings, layers by N, output, other. */
static uint64_t row_key(struct rf_svg_place p)
{
    switch (p.group) {
    case RF_SVG_ROW_EMBEDDINGS:
        return 0;
    case RF_SVG_ROW_LAYER:
        return 1 + (uint64_t)p.layer;
    case RF_SVG_ROW_OUTPUT:
        return 2 + (uint64_t)RF_SVG_MAX_LAYER;
    default:
        return 3 + (uint64_t)RF_SVG_MAX_LAYER;
    }
}

static void row_label(uint64_t key, char *buf, size_t len)
{
    if (key == 0)
        snprintf(buf, len, "embeddings");
    else if (key <= 1 + (uint64_t)RF_SVG_MAX_LAYER)
        snprintf(buf, len, "blk.%" PRIu64, key - 1);
    else if (key == 2 + (uint64_t)RF_SVG_MAX_LAYER)
        snprintf(buf, len, "output");
    else
        snprintf(buf, len, "other");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One cell of one panel. */
struct cell {
    uint64_t pages;       /* sum of the tensors' range pages */
    uint64_t resident;    /* of those, seen resident */
    uint64_t nonresident; /* seen not resident */
    uint64_t unknown;     /* not known */
    uint32_t tensors;     /* tensors drawn here (with or without pages) */
};

static int add_u64(uint64_t *acc, uint64_t v)
{
    return __builtin_add_overflow(*acc, v, acc) ? -EOVERFLOW : 0;
}

/* Writes s with &, <, >, " escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            /* control characters are not allowed in XML 1.0 text */
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
        }
    }
}

/* The fill of resident fraction bp (basis points): white-blue to dark blue. */
static void fill_color(uint32_t bp, char out[8])
{
    static const int lo[3] = {239, 243, 255}, hi[3] = {8, 48, 107};
    int c[3];
    for (int i = 0; i < 3; i++)
        c[i] = lo[i] + (int)((int64_t)(hi[i] - lo[i]) * (int64_t)bp / 10000);
    snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static void put_pct(FILE *f, uint32_t bp)
{
    fprintf(f, "%u.%02u%%", bp / 100, bp % 100);
}

static void draw_cell(FILE *f, int x, int y, const char *boundary, const char *row,
                      enum rf_svg_kind k, const struct cell *c)
{
    char fill[8] = "none";
    const char *extra = "";
    uint32_t bp = rf_residency_basis_points(c->resident, c->pages);

    if (c->pages == 0)
        extra = " stroke=\"#888888\" stroke-dasharray=\"2,2\"";
    else if (c->resident + c->nonresident == 0)
        snprintf(fill, sizeof(fill), "#bdbdbd");
    else
        fill_color(bp, fill);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"%s data-boundary=\"",
            x, y, CELL_W - 1, CELL_H - 1, fill, extra);
    put_escaped(f, boundary);
    fprintf(f,
            "\" data-row=\"%s\" data-kind=\"%s\" data-tensors=\"%u\" data-pages=\"%" PRIu64
            "\" data-resident-pages=\"%" PRIu64 "\" data-nonresident-pages=\"%" PRIu64
            "\" data-unknown-pages=\"%" PRIu64 "\"><title>%s %s at ",
            row, kind_names[k], c->tensors, c->pages, c->resident, c->nonresident, c->unknown, row,
            kind_names[k]);
    put_escaped(f, boundary);
    if (c->pages == 0) {
        fprintf(f, ": %u tensor(s) outside the model mapping (no file pages)</title></rect>\n",
                c->tensors);
        return;
    }
    fprintf(f, ": %" PRIu64 " of %" PRIu64 " pages resident (", c->resident, c->pages);
    put_pct(f, bp);
    fprintf(f, "), %" PRIu64 " not resident, %" PRIu64 " unknown</title></rect>\n", c->nonresident,
            c->unknown);
}

static void draw_legend(FILE *f, int y)
{
    static const uint32_t steps[] = {0, 2500, 5000, 7500, 10000};
    char fill[8];
    int x = MARGIN;

    fprintf(f, "<g class=\"legend\" font-size=\"10\">\n");
    fprintf(f, "<text x=\"%d\" y=\"%d\">fill: resident pages / the cell's file pages</text>\n", x,
            y + 10);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        int sx = x + (int)i * 46;
        fill_color(steps[i], fill);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                "stroke=\"#444444\" stroke-width=\"0.5\"/>\n",
                sx, y + 16, CELL_W - 1, CELL_H - 1, fill);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%u%%</text>\n", sx + CELL_W + 2, y + 25,
                steps[i] / 100);
    }
    int ux = x + 5 * 46 + 8;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#bdbdbd\"/>\n"
            "<text x=\"%d\" y=\"%d\">unknown (not observed)</text>\n",
            ux, y + 16, CELL_W - 1, CELL_H - 1, ux + CELL_W + 2, y + 25);
    ux += 140;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888888\" "
            "stroke-dasharray=\"2,2\"/>\n<text x=\"%d\" y=\"%d\">outside the mapping</text>\n",
            ux, y + 16, CELL_W - 1, CELL_H - 1, ux + CELL_W + 2, y + 25);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\">resident = in the kernel's page cache (the panel's source), "
            "not pages mapped in the process (smaps Rss):</text>\n"
            "<text x=\"%d\" y=\"%d\">a dontneed release unmaps pages without evicting them; "
            "pageout or memory pressure evicts them. Pages two tensors share count in "
            "both.</text>\n"
            "<text x=\"%d\" y=\"%d\">no cell: no tensor of that kind in that row. Hover a cell "
            "(its title) or read its data-* attributes for the figures.</text>\n</g>\n",
            x, y + 44, x, y + 57, x, y + 70);
}

/* Checks that snapshot s describes inv's entries in order. */
static bool matches(const struct rf_inventory *inv, const struct rf_residency_snapshot *s)
{
    if (!s || s->n != inv->n || (s->n && !s->resources))
        return false;
    for (size_t i = 0; i < inv->n; i++)
        if (s->resources[i].key.tensor_index != inv->entries[i].key.tensor_index ||
            s->resources[i].key.generation != inv->entries[i].key.generation)
            return false;
    return true;
}

static int render(const struct rf_residency_svg_params *p, FILE *f)
{
    const struct rf_inventory *inv = p->inventory;
    const size_t nb = p->n_boundaries;
    uint64_t *keys = NULL, *rows = NULL;
    size_t n_rows = 0;
    struct cell *cells = NULL;
    int rc = 0;

    keys = calloc(inv->n ? inv->n : 1, sizeof(*keys));
    rows = calloc(inv->n ? inv->n : 1, sizeof(*rows));
    if (!keys || !rows) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < inv->n; i++)
        keys[i] = rows[i] = row_key(rf_residency_svg_place(inv->entries[i].name));
    qsort(rows, inv->n, sizeof(*rows), cmp_u64);
    for (size_t i = 0; i < inv->n; i++)
        if (n_rows == 0 || rows[n_rows - 1] != rows[i])
            rows[n_rows++] = rows[i];
    cells = calloc(nb * (n_rows ? n_rows : 1) * RF_SVG_N_KINDS, sizeof(*cells));
    if (!cells) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < inv->n; i++) {
        const uint64_t *r = bsearch(&keys[i], rows, n_rows, sizeof(*rows), cmp_u64);
        size_t row = (size_t)(r - rows);
        enum rf_svg_kind k = rf_residency_svg_place(inv->entries[i].name).kind;
        for (size_t b = 0; b < nb; b++) {
            const struct rf_residency_resource *res = &p->boundaries[b].snapshot->resources[i];
            struct cell *c = &cells[(b * n_rows + row) * RF_SVG_N_KINDS + k];
            uint64_t pages = res->mapping_index >= 0 && res->pages.end_page > res->pages.first_page
                                 ? res->pages.end_page - res->pages.first_page
                                 : 0;
            c->tensors++;
            if ((rc = add_u64(&c->pages, pages)) < 0 ||
                (rc = add_u64(&c->resident, res->resident_pages)) < 0 ||
                (rc = add_u64(&c->nonresident, res->nonresident_pages)) < 0 ||
                (rc = add_u64(&c->unknown, res->unknown_pages)) < 0)
                goto out;
        }
    }

    int width = 2 * MARGIN + (int)nb * PANEL_W + (int)(nb - 1) * PANEL_GAP;
    int grid_top = TOP_H + HEADER_H;
    int height = grid_top + (int)n_rows * CELL_H + LEGEND_H + MARGIN;
    if (width < 640)
        width = 640;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            width, height, width, height, width, height);
    fprintf(f, "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">", MARGIN);
    put_escaped(f, p->title ? p->title : "ramforge residency");
    fprintf(f,
            "</text>\n<text x=\"%d\" y=\"32\" font-size=\"10\">%zu tensors in %zu rows; each "
            "cell: the fraction of its tensors' file pages resident at that boundary</text>\n",
            MARGIN, inv->n, n_rows);
    for (size_t b = 0; b < nb; b++) {
        const struct rf_residency_svg_boundary *pb = &p->boundaries[b];
        const char *label = pb->label ? pb->label : "snapshot";
        int x0 = MARGIN + (int)b * (PANEL_W + PANEL_GAP);
        fprintf(f, "<g class=\"panel\" data-boundary=\"");
        put_escaped(f, label);
        fprintf(f, "\" data-source=\"");
        put_escaped(f, pb->snapshot->source);
        fprintf(f,
                "\" font-size=\"9\">\n<text x=\"%d\" y=\"%d\" font-size=\"11\" "
                "font-weight=\"bold\">",
                x0, TOP_H + 8);
        put_escaped(f, label);
        fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\">", x0, TOP_H + 20);
        put_escaped(f, pb->snapshot->source);
        fputs(" at ", f);
        put_escaped(f, label);
        fputs("</text>\n", f);
        for (int k = 0; k < RF_SVG_N_KINDS; k++) {
            int tx = x0 + LABEL_W + k * CELL_W + CELL_W / 2 + 3, ty = grid_top - 3;
            fprintf(f, "<text x=\"%d\" y=\"%d\" transform=\"rotate(-90 %d %d)\">%s</text>\n", tx,
                    ty, tx, ty, kind_names[k]);
        }
        for (size_t r = 0; r < n_rows; r++) {
            char row[32];
            int y = grid_top + (int)r * CELL_H;
            row_label(rows[r], row, sizeof(row));
            fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", x0, y + CELL_H - 2, row);
            for (int k = 0; k < RF_SVG_N_KINDS; k++) {
                const struct cell *c = &cells[(b * n_rows + r) * RF_SVG_N_KINDS + k];
                if (c->tensors)
                    draw_cell(f, x0 + LABEL_W + k * CELL_W, y, label, row, (enum rf_svg_kind)k, c);
            }
        }
        fputs("</g>\n", f);
    }
    draw_legend(f, grid_top + (int)n_rows * CELL_H + 12);
    fputs("</svg>\n", f);
out:
    free(cells);
    free(rows);
    free(keys);
    return rc;
}

int rf_residency_svg_render(const struct rf_residency_svg_params *p, char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;

    if (!p || !out || !p->inventory || !p->boundaries || p->n_boundaries == 0 ||
        p->n_boundaries > RF_SVG_MAX_BOUNDARIES)
        return -EINVAL;
    for (size_t b = 0; b < p->n_boundaries; b++)
        if (!matches(p->inventory, p->boundaries[b].snapshot))
            return -EINVAL;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return -ENOMEM;
    int rc = render(p, f);
    if (fclose(f) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

int rf_residency_svg_write(const struct rf_residency_svg_params *p, const char *path)
{
    char *s = NULL;

    if (!path)
        return -EINVAL;
    int rc = rf_residency_svg_render(p, &s, NULL);
    if (rc < 0)
        return rc;
    rc = rf_file_write_text(path, s);
    free(s);
    return rc;
}
