/*
 * forge page sampling: the page-cache state of a loaded model's tensor
 * pages, observed with mincore through the model's validated file mapping,
 * and the GGUF tensor table without loading llama.cpp.
 *
 * Addresses are located only through the model's mapping metadata (the
 * r--s mapping of the model file that forge_model_load found in
 * /proc/self/maps) and re-validated in a fresh read of /proc/self/maps on
 * every call: a range must lie in an r--s VMA of the same device+inode at
 * the file offset it claims. No pointer or physical address is exposed.
 * Observation never faults a page in or evicts one.
 *
 * What is measured is "in page cache" (mincore on a file mapping looks up
 * the page cache for pages this process does not map), not "mapped in
 * this process" (smaps Rss: after MADV_DONTNEED a page is still in the
 * page cache). Names below say page_cache for that reason.
 *
 * The fake-residency rule (pages.h): when this process neither owns nor
 * may write the model file, mincore reports every page resident; such
 * pages are reported unknown with the reason, and the whole file's
 * page-cache figure comes from cachestat(2) where the kernel allows it.
 *
 * A sample is a point-in-time observation: residency may change right
 * after it. It never authorizes release or eviction.
 */
#ifndef RAMFORGE_FORGE_PAGES_H
#define RAMFORGE_FORGE_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"
#include "ramforge/core/profile.h"
#include "ramforge/core/residency.h"
#include "ramforge/forge/forge.h"
#include "ramforge/sys/pages.h"
#include "ramforge/sys/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The page-cache state of file pages [first_page, first_page + n_pages)
 * (units: the kernel page size, counted from the start of the file) of
 * the model's mapping mapping_index, written to states[0..n_pages) as
 * RF_PAGE_RESIDENT / RF_PAGE_NONRESIDENT. Same contract as
 * rf_page_sampler_fn (use forge_page_sampler as the callback). Allocates
 * nothing. On any error every page is RF_PAGE_UNKNOWN and the error is
 * returned (forge_page_error_reason gives the text):
 *   -ENXIO   the model has no validated file mapping (or mapping_index != 0)
 *   -EFAULT  the range lies outside the validated mapping, or the VMA there
 *            is not the model file's r--s mapping at that offset
 *   -ENOENT  no VMA at the range any more: the mapping disappeared
 *   -ENOMEM  mincore found part of the range unmapped (same cause, raced)
 *   -EACCES  mincore is not trustworthy for this file (fake residency)
 *   -ESTALE  the file at the model's path is not the mapped file (replaced
 *            or removed), so trustworthiness cannot be checked
 *   -EBADMSG a malformed /proc/self/maps line
 *   -EINVAL  NULL m or states
 */
int forge_model_sample_pages(struct forge_model *m, int32_t mapping_index, uint64_t first_page,
                             uint64_t n_pages, uint8_t *states);

/* forge_model_sample_pages as an rf_page_sampler_fn; ud is the struct forge_model *. */
static inline int forge_page_sampler(void *ud, int32_t mapping_index, uint64_t first_page,
                                     uint64_t n_pages, uint8_t *states)
{
    return forge_model_sample_pages((struct forge_model *)ud, mapping_index, first_page, n_pages,
                                    states);
}

/*
 * A page pass: one validation for many windows, e.g. a page snapshot at a
 * boundary. forge_page_pass_begin checks once what forge_model_sample_pages
 * checks on every call (the file at the model's path is the mapped file,
 * mincore is trustworthy for it) and reads /proc/self/maps once;
 * forge_page_pass_sample then locates each window in that read and runs
 * mincore alone. The pass is a point-in-time view of the mappings: use it
 * on the thread that owns the model, for one pass, with no release or
 * unmap in between (a mapping that changed anyway makes mincore answer
 * -ENOMEM or about the pages now there; it never faults or evicts a page).
 */
struct forge_page_pass {
    struct forge_model *m;  /* borrowed */
    int error;              /* 0, or why every window is unknown (forge_page_error_reason:
                               -EACCES, -ESTALE, or the maps read's error) */
    struct rfsys_maps maps; /* the read of /proc/self/maps; owned */
};

/*
 * Starts a pass over m's pages into *out (end it with forge_page_pass_end).
 * Returns 0, also when the checks failed (out->error then leaves every
 * window unknown), or -EINVAL for a NULL argument.
 */
int forge_page_pass_begin(struct forge_model *m, struct forge_page_pass *out);

/*
 * forge_model_sample_pages within pass p: same arguments, states and
 * errors (out->error for every window when the pass's checks failed), no
 * open, stat or /proc read per call.
 */
int forge_page_pass_sample(struct forge_page_pass *p, int32_t mapping_index, uint64_t first_page,
                           uint64_t n_pages, uint8_t *states);

/* forge_page_pass_sample as an rf_page_sampler_fn; ud is the struct forge_page_pass *. */
static inline int forge_page_pass_sampler(void *ud, int32_t mapping_index, uint64_t first_page,
                                          uint64_t n_pages, uint8_t *states)
{
    return forge_page_pass_sample((struct forge_page_pass *)ud, mapping_index, first_page, n_pages,
                                  states);
}

/* Frees the pass's maps read. NULL is a no-op. */
void forge_page_pass_end(struct forge_page_pass *p);

/* Static one-line text for an error of the samplers above; never NULL. */
const char *forge_page_error_reason(int err);

/* One tensor's sample (forge_sample_tensor_pages). */
struct forge_tensor_sample {
    uint32_t tensor_index;
    int32_t mapping_index; /* -1: no validated mapping range, nothing inspected */
    uint64_t first_page;   /* the tensor's outward file page range [first, end) */
    uint64_t end_page;
    uint64_t inspected_pages;   /* pages written to states: min(range, RF_PAGE_WINDOW_PAGES) */
    uint64_t resident_pages;    /* of those, in the page cache */
    uint64_t nonresident_pages; /* of those, not in the page cache */
    uint64_t unknown_pages;     /* of those, unknown (error, fake residency) */
    bool truncated;             /* the range has more pages than RF_PAGE_WINDOW_PAGES:
                                   only the first were inspected; a partial sample */
    bool complete;              /* every page of the range inspected with a known state
                                   (false when truncated, missing or failed) */
    int error;                  /* 0, or the negative errno that left pages unknown or
                                   the tensor unmapped (-ENXIO) */
    const char *reason;         /* static text for error; "" when 0 */
};

/*
 * Samples the first pages (at most RF_PAGE_WINDOW_PAGES) of tensor
 * tensor_index's validated file page range into states (page first_page +
 * i at states[i]) and summarises it in *out. Allocates nothing; usable
 * before a node's dispatch. A tensor without a validated mapping range
 * has mapping_index -1 and error -ENXIO (no guessed identity); mapping or
 * mincore failure leaves the inspected pages unknown with error/reason.
 * Returns 0 whenever *out was filled, -EINVAL (NULL argument) or -ENOENT
 * (no such tensor); then *out has mapping_index -1.
 */
int forge_sample_tensor_pages(struct forge_model *m, uint32_t tensor_index,
                              uint8_t states[RF_PAGE_WINDOW_PAGES],
                              struct forge_tensor_sample *out);

/* Where a model's page-cache figures come from, and the whole file's page-cache figure. */
struct forge_page_source {
    bool mincore_trustworthy;             /* mincore reports real page-cache state for the file */
    const char *mincore_reason;           /* static text: why it is or is not */
    char source[RF_RESIDENCY_SOURCE_MAX]; /* for rf_residency_params.source: "mincore", or
                                             "unknown: <reason>" */
    uint64_t page_bytes;                  /* kernel page size */
    uint64_t file_pages;                  /* ceil(file size / page_bytes) */
    int file_cache_error;                 /* 0: file_cached_pages holds the figure; else -ENOSYS
                                             (cachestat needed and absent: Linux < 6.5), -EPERM
                                             (refused), -ESTALE, ... */
    uint64_t file_cached_pages;           /* pages of the whole file in the page cache */
    char file_cache_source[RF_RESIDENCY_SOURCE_MAX]; /* "mincore (mapped pages) + cachestat
                                   (N pages outside the mapping)", "mincore", "cachestat",
                                   or "unknown: <reason>" */
};

/*
 * Fills *out for the model's file: opens it by path, checks it is the
 * mapped file (device+inode), applies rfsys_mincore_trustworthy, and
 * counts the whole file's pages in the page cache. Where mincore is
 * trustworthy, the pages of the validated mapping are counted with mincore
 * in one page pass (the mapped pages' page tables answer at once) and only
 * the pages outside it (the header llama.cpp unmapped) with cachestat;
 * else cachestat covers the whole file (it looks every page up in the page
 * cache: several times slower on a mapped model). Returns 0 (failures are
 * described in *out), or -EINVAL for a NULL argument.
 */
int forge_model_page_source(struct forge_model *m, struct forge_page_source *out);

/* A GGUF file's tensor table and identity, read without llama.cpp. */
struct forge_gguf_table {
    struct rf_tensor_meta *tensors; /* n_tensors, GGUF order; owned. mapping_index 0,
                                       access RF_ACCESS_UNKNOWN */
    size_t n_tensors;
    struct rf_mapping_meta mapping;   /* index 0, path, size, device, inode; validated false
                                         and no fragment: nothing is mapped */
    uint64_t data_offset_bytes;       /* GGUF data section offset */
    uint64_t header_read_bytes;       /* ramforge read [0, this) of the file, without
                                         readahead: the only pages its read could bring into
                                         the page cache */
    const char *header_direct_reason; /* static: why the header was not read with O_DIRECT
                                         (the filesystem refuses it, or its pages are memory);
                                         NULL: read with O_DIRECT, nothing entered the cache */
};

/*
 * Reads PATH's header with gguf (no tensor data, no llama.cpp model load,
 * so no page of the data section is read or prefetched; with O_DIRECT
 * where the filesystem allows it, so no page enters the page cache) into *out (free
 * with forge_gguf_table_free). Errors: those of forge_gguf_check, -ENOMEM;
 * err says why.
 */
int forge_gguf_read_table(const char *path, struct forge_gguf_table *out, char err[FORGE_ERR_MAX]);

/*
 * The model identity of the GGUF file at path (profile.h,
 * rf_profile_identity): the SHA-256 of its header bytes (everything before
 * the data section: magic, version, metadata, tensor names, types, shapes
 * and offsets) and its size, so a copy of the file has the same identity
 * and any change of the model another. *file_size_bytes receives the
 * size. No tensor data is read. Errors: those of forge_gguf_check, -EFBIG
 * (a header above 256 MiB), -EIO, -ENOMEM, -errno of open; err says why.
 */
int forge_gguf_identity(const char *path, char out[RF_PROFILE_IDENTITY_MAX],
                        uint64_t *file_size_bytes, char err[FORGE_ERR_MAX]);

/*
 * Whether llama.cpp's CPU backend (v0.4.0, v0.5.0, with its default extra
 * buffer types) copies the tensor NAME of ggml type TYPE_NAME ("q4_0", ...)
 * into an anonymous CPU_REPACK buffer on this host (x86 with AVX2): a
 * layer matrix or output.weight of type Q4_0, Q4_K or IQ4_NL. Its file
 * pages are then read once at load and never again. The header rule
 * forge_gguf_estimate uses; false for NULL.
 */
bool forge_gguf_tensor_copied(const char *name, const char *type_name);

/* Frees the table; leaves it empty. NULL is a no-op. */
void forge_gguf_table_free(struct forge_gguf_table *t);

/* What loading a GGUF file will cost, estimated from its header alone. */
struct forge_gguf_estimate {
    uint64_t file_size_bytes;                    /* st_size */
    uint32_t n_layer, n_embd, n_head, n_head_kv; /* "<arch>.block_count", ...; 0: absent */
    uint32_t n_ctx_train;    /* "<arch>.context_length": a program's default context; 0: absent */
    uint64_t repacked_bytes; /* blk.* and output.weight weights of a type
                                llama.cpp repacks into anonymous CPU_REPACK
                                buffers on AVX2 (Q4_0, Q4_K, IQ4_NL), bytes;
                                0 without use_extra_bufts or AVX2 */
    uint64_t repacked_max_bytes;      /* the largest of those weights, bytes: what the release
                                         during the load holds twice at once */
    uint64_t file_working_set_bytes;  /* the other weights, read from the mapping each token
                                         (token_embd.weight excluded: read by rows), bytes:
                                         dense_read_bytes + k/n of routed_read_bytes */
    uint32_t n_expert, n_expert_used; /* MoE: "<arch>.expert_count", "expert_used_count" (n,
                                         k); 0: dense */
    uint64_t dense_read_bytes;        /* of those weights, the ones every token reads, bytes */
    uint64_t routed_read_bytes;       /* the routed expert tensors among them (experts.h), of
                                         which a token reads k/n, bytes */
    uint32_t expert_layers;           /* layers (blk.N below n_layer) with routed tensors */
    uint64_t n_tensors;               /* tensors in the header */
    uint64_t n_vocab;                 /* tokenizer.ggml.tokens entries; 0: absent */
};

/*
 * Reads PATH's GGUF header (no data, no llama.cpp load) and fills *out.
 * The repacked/file split follows llama.cpp's CPU_REPACK rules (v0.4.0, v0.5.0) as
 * measured here (a header estimate, confirmed after the load by the
 * access probe). Errors: -EINVAL, those of forge_gguf_check, -EOVERFLOW.
 */
int forge_gguf_estimate(const char *path, bool use_extra_bufts, struct forge_gguf_estimate *out,
                        char err[FORGE_ERR_MAX]);

#ifdef __cplusplus
}
#endif

#endif
