/*
 * The report writer's sections, private to core (src/core/, not part of
 * core's internal interface): report.c assembles the document from these.
 * Each returns a new reference, or NULL when out of memory (the writer
 * then finds the key unset and returns -ENOMEM). A figure not measured is
 * JSON null; a section not run keeps its keys, null, with a reason.
 */
#ifndef RAMFORGE_CORE_REPORT_SECTIONS_H
#define RAMFORGE_CORE_REPORT_SECTIONS_H

#include "ramforge/core/json_util.h"
#include "ramforge/core/report.h"
#include "ramforge/core/report_json.h"

/* {"<key>": null, ..., "reason": reason} for a section this run does not fill (report.c). */
json_t *rf_report_absent_section(const char *reason, const char *const *keys);

/* model: the file, its filesystem, the access basis and the inventory (report_model.c). */
json_t *rf_report_model_json(const struct rf_report *r);

/* ledger: the categories and their reconciliation rc (report_memory.c). */
json_t *rf_report_ledger_json(const struct rf_ledger *l, const struct rf_reconciliation *rc);

/* One residency.samples entry (report_memory.c). */
json_t *rf_report_sample_json(const struct rf_residency_sample *s);

/* policy and admission, with the hard limit and the kernel's verdict (report_memory.c). */
json_t *rf_report_policy_json(const struct rf_report *r);
json_t *rf_report_admission_json(const struct rf_report *r);

/*
 * plan, application, native, lifetime, staging, profile and
 * residency.dispatch (report_release.c); keys: the absent section's keys.
 */
json_t *rf_report_plan_json(const struct rf_report *r);
json_t *rf_report_application_json(const struct rf_report *r);
json_t *rf_report_native_json(const struct rf_report *r);
json_t *rf_report_lifetime_json(const struct rf_report *r);
json_t *rf_report_staging_json(const struct rf_report *r, const char **keys);
json_t *rf_report_profile_json(const struct rf_report *r, const char **keys);
json_t *rf_report_dispatch_json(const struct rf_report *r);

/* residency.experts: a MoE model's observed routing (report_routing.c). */
json_t *rf_report_routing_json(const struct rf_report *r);

#endif
