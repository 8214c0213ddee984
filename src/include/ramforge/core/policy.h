/*
 * Policy profiles and the release plan: which eligible tensors a profile
 * selects at a safe boundary, and which file pages that selection may
 * advise away without touching a page some unselected tensor still covers.
 *
 * A plan is pure arithmetic over an rf_inventory plus a few measured facts
 * (mapping resident bytes, the native binding verdict, an optional access
 * profile). Building one never touches memory; applying it is forge's job,
 * and the native lifetime gate remains the final authority. The byte
 * figures a plan carries are estimates (provenance "estimated" in the
 * ledger), never measured reclamation.
 *
 * Also here: rf_parse_size, the byte-size syntax of the CLI's --target and
 * --reserve (implemented in src/core/size.c).
 */
#ifndef RAMFORGE_POLICY_H
#define RAMFORGE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ramforge/core/intervals.h"
#include "ramforge/core/inventory.h"
#include "ramforge/error.h"
#include "ramforge/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* enum rf_policy_profile (the spec's profiles) is in ramforge/types.h. */

/*
 * Parses a profile name: "off", "observe", "conservative", "memory-bound",
 * "reuse-aware", "active" or "streaming" (exact, lowercase). Errors: -EINVAL (unknown
 * name, NULL argument); *out is unchanged on error.
 */
int rf_policy_parse(const char *name, enum rf_policy_profile *out);

/* The profile's static name as rf_policy_parse spells it; NULL outside the enum. */
const char *rf_policy_name(enum rf_policy_profile p);

bool rf_policy_plans(enum rf_policy_profile p);           /* all but off */
bool rf_policy_mutates(enum rf_policy_profile p);         /* conservative, memory-bound,
                                                             reuse-aware, active */
bool rf_policy_requires_target(enum rf_policy_profile p); /* memory-bound, active */

/*
 * Parses a release mode of the process's own pages: "dontneed" or "pageout"
 * (exact, lowercase; RF_RELEASE_MODE_NAMES for messages). watch advises
 * another process through process_madvise(2), which refuses MADV_DONTNEED:
 * its --release-mode takes "cold" or "pageout" (rfsys_remote_advice).
 * Errors: -EINVAL (unknown name, NULL argument); *out is unchanged on error.
 */
int rf_release_mode_parse(const char *name, enum rf_release_mode *out);

/* The mode's static name as rf_release_mode_parse spells it; NULL outside the enum. */
const char *rf_release_mode_name(enum rf_release_mode m);

#define RF_RELEASE_MODE_NAMES "dontneed or pageout" /* for "expected ..." messages */

/*
 * Parses a byte size by one rule, Kubernetes' for a memory quantity
 * (RF_SIZE_RULE, the sentence --help, ramforge(1) and docs/guide/README.md print):
 *
 *   size     = number [ suffix | exponent ]
 *   number   = digits [ "." [ digits ] ] | "." digits
 *   suffix   = Ki Mi Gi Ti Pi Ei        x 1024^1..6   (binary; KiB .. EiB too,
 *                                                      which Kubernetes does not take)
 *            | k  M  G  T  P  E         x 1000^1..6   (decimal)
 *   exponent = ( "e" | "E" ) [ "+" | "-" ] digits      x 10^digits ("1e9", "15E-1")
 *
 * Suffixes are case-sensitive, as in Kubernetes ("E" followed by digits is
 * an exponent, alone it is exa). The value is computed exactly, in integers,
 * and must be a whole number of bytes. No sign, no space.
 *
 * Errors: -EINVAL (NULL, empty, unparsable, a sign, a space, trailing junk,
 * a suffix Kubernetes refuses or reads otherwise: "2GB", "512K", "300m",
 * "2gi"; or zero bytes), -EDOM (not a whole number of bytes: "1.5",
 * "0.1Ki", "1e-1"), -EOVERFLOW (over UINT64_MAX, or more than 38 significant
 * digits). Syntax is checked before size, so "99999999999999999999x" is
 * -EINVAL. *out_bytes is unchanged on error.
 */
int rf_parse_size(const char *s, uint64_t *out_bytes);

/*
 * For a size rf_parse_size refused with -EINVAL whose spelling has an
 * obvious meaning, the spelling to use, into buf (len bytes, cut): "2GB"
 * -> "write 2G (decimal) or 2Gi (binary), as Kubernetes writes them",
 * "300m" -> Kubernetes' milli, "2gi" -> case, "1 Gi" -> no space, "10B" ->
 * a number alone. Returns false (buf "") when it has no suggestion.
 */
bool rf_size_hint(const char *s, char *buf, size_t len);

/*
 * Formats bytes for a person, the CLI's byte formatting rule: under 1 KiB
 * "N B", else two decimals of the largest IEC unit not above it ("1.50
 * MiB"). Into buf (len bytes, cut; 32 hold any value). Returns buf.
 */
const char *rf_size_format(uint64_t bytes, char *buf, size_t len);

/*
 * Copies in to buf (len bytes, always NUL-terminated, cut if need be) with
 * every "N bytes" written as rf_size_format writes it ("24121344 bytes" ->
 * "23.00 MiB"): the library's reasons keep exact bytes for the JSON
 * report, a person reads them this way (never longer than in). Returns buf.
 */
const char *rf_size_text(const char *in, char *buf, size_t len);

/* The size rule in one sentence: every --help, ramforge(1) and docs/guide/README.md print it as it
 * is. */
#define RF_SIZE_RULE                                                                               \
    "SIZE is bytes written as Kubernetes writes a memory quantity: a number, which may have a "    \
    "fraction or a decimal exponent (1.5Gi, 1e9) when the result is whole bytes, alone or with "   \
    "one case-sensitive suffix, Ki, Mi, Gi, Ti, Pi, Ei for powers of 1024 (KiB, MiB, ... too) "    \
    "or k, M, G, T, P, E for powers of 1000, and what Kubernetes refuses or reads otherwise "      \
    "(2GB, 512K, 300m, which is milli) is refused with the spelling to use (systemd and Docker "   \
    "read 2G as 2Gi: write Gi for them)."

/* Inputs of rf_plan_build. Start from rf_plan_default_params(). */
struct rf_plan_params {
    enum rf_policy_profile profile;
    bool has_target;
    uint64_t target_bytes;  /* mapping-resident target; meaningful when has_target */
    uint64_t reserve_bytes; /* safety reserve taken off the target; must be < target */
    bool has_mapping_resident;
    uint64_t mapping_resident_bytes; /* measured FileBackedResident, all model mappings */
    bool binding_ok;                 /* native contract bound, matching and quiescent */
    const char *binding_reason;      /* why selection is refused when !binding_ok; borrowed */
    const uint32_t *profile_order;   /* access profile: tensor indices, coldest first;
                                        NULL: none; borrowed */
    size_t n_profile_order;          /* entries in profile_order */
    bool dead_pages_only;   /* select every RF_ELIGIBLE_DEAD_FILE_PAGES candidate and nothing
                               else, whatever the target (the after-load boundary) */
    const uint8_t *exclude; /* inv->n flags by entry position, nonzero: never select (already
                               released and not referenced since); their pages stay
                               protected; NULL: none. Borrowed. */
};

struct rf_plan {
    enum rf_policy_profile profile;
    uint64_t generation;  /* inventory generation the plan was built from */
    uint64_t page_bytes;  /* the inventory's page size */
    bool applied_profile; /* rf_policy_mutates(profile): the plan may be applied */
    bool profile_used;    /* a valid access profile ordered the selection */
    bool has_soft_target;
    uint64_t soft_target_bytes; /* target - reserve; meaningful when has_soft_target */
    size_t n_candidates;        /* entries the profile could select from */
    uint32_t *selected;         /* tensor indices, in selection order; owned */
    size_t n_selected;
    uint64_t selected_logical_bytes; /* sum of the selected tensors' payloads */
    struct rf_file_range *release;   /* sorted by (mapping, first page), disjoint and
                                           non-adjacent within a mapping; owned */
    size_t n_release;
    uint64_t release_pages;          /* pages in release */
    uint64_t release_bytes;          /* release_pages * page_bytes */
    uint64_t shared_bytes_protected; /* pages of selected tensors kept because an
                                        unselected file-backed tensor covers them, bytes */
    size_t n_shared_dead_selected;   /* conservative's dead-file-pages release: selected
                                        tensors with shared pages (the exception to its
                                        zero-shared rule, said in reason) */
    bool has_estimated_resident_after;
    uint64_t estimated_resident_after_bytes; /* mapping_resident - release_bytes, floored
                                                at 0: assumes released pages were resident */
    bool target_met;         /* has_soft_target and estimated_resident_after <= soft target */
    char reason[RF_ERR_MAX]; /* one line: what was selected and why, or why nothing was */
};

/*
 * Profile off, no target, no resident measurement, binding refused with no
 * reason, no access profile, dead_pages_only false.
 */
struct rf_plan_params rf_plan_default_params(void);

void rf_plan_init(struct rf_plan *plan);

/* Frees the selection and release arrays; leaves an empty plan. NULL is a no-op. */
void rf_plan_free(struct rf_plan *plan);

/*
 * Builds the plan of p->profile over inv into *out (initialised; old
 * content freed on success, unchanged on error).
 *
 * Soft target: target - reserve, when a target is given. Candidates:
 * entries of inv's generation that are file-backed and RF_ELIGIBLE or
 * RF_ELIGIBLE_DEAD_FILE_PAGES (only the latter with dead_pages_only);
 * conservative also requires shared_page_bytes == 0 (unless dead_pages_only); entries
 * flagged in exclude are skipped. Without binding_ok
 * nothing is selected and reason is binding_reason.
 *
 * Order: dead-file-pages candidates first (the graph reads an anonymous
 * copy), then the rest; each group largest unique_reclaimable_bytes first,
 * ties by tensor index. For reuse-aware with a valid access profile the
 * rest go in profile order (coldest first), then candidates the profile
 * does not name, largest first; profile_used is set. A profile naming a
 * tensor index twice or one not in inv is ignored (profile_used false, the
 * reason says so); other profiles ignore it.
 *
 * Selection:
 *   off           nothing
 *   dead_pages_only (any planning profile): every dead-file-pages
 *                 candidate, whatever the target: they cost nothing to lose
 *   conservative  only tensors with shared_page_bytes == 0, live or dead
 *                 (the spec's rule; dead_pages_only is the separate,
 *                 explicit after-load release). No target: every zero-shared
 *                 dead-file-pages candidate; with a target and a resident
 *                 measurement: in order until met; with a target but no
 *                 measurement: zero-shared dead-file-pages only
 *   memory-bound, active, reuse-aware (no valid profile: as memory-bound),
 *   observe       in order, while the estimated resident after release is
 *                 above the soft target; needs a target (observe and
 *                 reuse-aware without one select nothing) and a resident
 *                 measurement (without one: nothing, and the reason says so)
 *
 * Release ranges: the union of the selected tensors' outward page ranges
 * minus every page any unselected file-backed entry of the same mapping
 * covers, whatever its eligibility. Pages shared only among selected
 * tensors are released. A page is never released unless a selected tensor
 * covers it. Entries the inventory could not place in a mapping have no
 * pages and protect nothing. Cost O(s log s + sum of segments per tensor),
 * s = 2 x file-backed entries.
 *
 * Errors: -EINVAL (NULL inv/p/out, unknown profile, a required target
 * missing, reserve >= target, profile_order NULL with n_profile_order > 0,
 * an inventory entry with a bad mapping index), -EOVERFLOW (a byte sum),
 * -ENOMEM.
 */
int rf_plan_build(const struct rf_inventory *inv, const struct rf_plan_params *p,
                  struct rf_plan *out);

#ifdef __cplusplus
}
#endif

#endif
