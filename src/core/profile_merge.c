/*
 * Merging one process's additions to a persisted access profile into the
 * file as another process left it (profile.h): the read-merge-write of a
 * save, so that concurrent runs sharing one profile lose no update.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ramforge/core/profile.h"

int rf_profile_merge(struct rf_profile *disk, const struct rf_profile *ours,
                     uint64_t base_operations, bool traced, size_t n_new_history)
{
    if (!disk || !ours || base_operations > ours->operations)
        return -EINVAL;
    uint64_t added = ours->operations - base_operations, ops;
    if (__builtin_add_overflow(disk->operations, added, &ops))
        return -EOVERFLOW;
    if (traced) {
        struct rf_profile_tensor *t = NULL;
        if (ours->n_tensors && !(t = malloc(ours->n_tensors * sizeof(*t))))
            return -ENOMEM;
        if (t)
            memcpy(t, ours->tensors, ours->n_tensors * sizeof(*t));
        free(disk->tensors);
        disk->tensors = t;
        disk->n_tensors = ours->n_tensors;
    }
    if (ours->routing.n_layer) { /* the routing last observed is the profile's */
        struct rf_routing r;
        int rc = rf_routing_copy(&ours->routing, &r);
        if (rc < 0)
            return rc;
        rf_routing_free(&disk->routing);
        disk->routing = r;
    }
    disk->operations = ops;
    disk->max_history = ours->max_history;
    size_t n_new = n_new_history < ours->n_history ? n_new_history : ours->n_history;
    for (size_t i = ours->n_history - n_new; i < ours->n_history; i++) {
        int rc = rf_profile_history_push(disk, &ours->history[i]);
        if (rc < 0)
            return rc;
    }
    /* a history longer than ours' bound (another process's --profile-history) */
    if (disk->n_history > disk->max_history) {
        size_t drop = disk->n_history - disk->max_history;
        memmove(disk->history, disk->history + drop, disk->max_history * sizeof(*disk->history));
        disk->n_history = disk->max_history;
    }
    return 0;
}
