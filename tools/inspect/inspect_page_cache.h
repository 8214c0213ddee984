/*
 * ramforge inspect --page-cache (inspect_page_cache.c): the page-cache
 * view of one or several model files.
 */
#ifndef RAMFORGE_TOOLS_INSPECT_PAGE_CACHE_H
#define RAMFORGE_TOOLS_INSPECT_PAGE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * inspect --page-cache over model (-m MODEL, may be NULL) and the n
 * operands paths, in that order: one table each (headed "==> PATH <=="
 * when several), shaped by columns, by_layer, noheadings and raw, or one
 * JSON document (a page_cache_list when several); at most budget pages
 * per pass; svg_path: also the snapshot as SVG. Every file is tried; the
 * exit status is that of the worst.
 */
int inspect_page_cache_files(const char *model, int n, char **paths, const char *columns,
                             bool by_layer, bool noheadings, bool raw, bool json, uint64_t budget,
                             const char *svg_path);

#endif
