/*
 * ramforge inspect's scriptable output: the JSON envelope every inspect
 * document carries (kind, schema_version, versions; schema/inspect.schema.json)
 * and the page-cache table's fincore-like column selection (-o), headings
 * (-n) and per-layer grouping (--by-layer).
 */
#ifndef RAMFORGE_TOOLS_INSPECT_TABLE_H
#define RAMFORGE_TOOLS_INSPECT_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ramforge/core/inventory.h"
#include "ramforge/core/residency.h"

#define INSPECT_SCHEMA_VERSION 1
#define INSPECT_KIND_INVENTORY "ramforge.inspect.inventory"
#define INSPECT_KIND_PAGE_CACHE "ramforge.inspect.page_cache"
#define INSPECT_KIND_PAGE_CACHE_LIST "ramforge.inspect.page_cache_list"

/*
 * Adds schema_version, kind, ramforge_version and llama_cpp_version to doc
 * (a JSON object). Returns 0, or -ENOMEM.
 */
int inspect_envelope(json_t *doc, const char *kind);

#define INSPECT_MAX_COLUMNS 16

/* What the page-cache table prints. */
struct inspect_table {
    int columns[INSPECT_MAX_COLUMNS]; /* column ids in print order */
    size_t n_columns;
    bool by_layer;   /* one row per layer (blk.N) and per other tensor group */
    bool noheadings; /* rows only: no heading line and no summary lines */
    bool raw;        /* -b: bytes as integers */
};

/*
 * Sets *t from -o LIST (NULL: the defaults; "+A,B": the defaults and A, B,
 * as fincore), --by-layer and -n. Column names are case-insensitive. On an
 * unknown or misplaced column prints the usage error and returns false.
 */
bool inspect_table_parse(const char *list, bool by_layer, bool noheadings, bool raw,
                         struct inspect_table *t);

/* The column names -o takes, for messages: "INDEX, NAME, ..." */
const char *inspect_table_column_list(void);

/* One line per column (name, meaning, where it applies) for --help. */
void inspect_table_usage(FILE *out);

/*
 * Prints the table's heading (unless noheadings) and rows for one file:
 * per tensor, or per layer with by_layer. path fills the FILE column.
 */
void inspect_table_print(const struct inspect_table *t, const char *path,
                         const struct rf_inventory *inv, const struct rf_residency_snapshot *snap,
                         uint64_t page_bytes);

#endif
