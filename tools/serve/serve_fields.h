/*
 * ramforge serve: the typed fields of a request body (serve_fields.c),
 * shared by the body parsers (serve_request.c). Each helper leaves *out
 * as it is when the field is absent or null, and returns false with msg
 * (a 400's message naming the field) when it has the wrong type or range.
 */
#ifndef RAMFORGE_TOOLS_SERVE_FIELDS_H
#define RAMFORGE_TOOLS_SERVE_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "serve_request.h"

/* An integer. */
bool serve_field_int(json_t *body, const char *key, long long *out, char *msg, size_t len);
/* An integer in [lo, hi]. */
bool serve_field_int_range(json_t *body, const char *key, long long lo, long long hi,
                           long long *out, char *msg, size_t len);
/* A number. */
bool serve_field_number(json_t *body, const char *key, double *out, char *msg, size_t len);
/* A finite number in [lo, hi]. */
bool serve_field_range(json_t *body, const char *key, double lo, double hi, double *out, char *msg,
                       size_t len);
/* A string (*out borrowed from body; NULL when absent or null). */
bool serve_field_string(json_t *body, const char *key, json_t **out, char *msg, size_t len);
/* A boolean. */
bool serve_field_bool(json_t *body, const char *key, bool *out, char *msg, size_t len);

/* Every key of body is in known (NULL-terminated), or false naming the first not (in what). */
bool serve_keys_in(json_t *body, const char *const *known, const char *what, char *msg, size_t len);

/* Every key of body is honoured by api (serve_fields_*), or false naming the first that is not. */
bool serve_fields_known(json_t *body, enum serve_api api, char *msg, size_t len);

/*
 * The fields of body but the prompt and n_predict into j: samplers, seed
 * (env->seed when absent), n/n_cmpl (1 only), probabilities, stop
 * strings, logit biases, stream and the answer's shape. Returns 0, 400 or
 * 500 with msg.
 */
int serve_parse_fields(const struct serve_request_env *env, json_t *body, enum serve_api api,
                       struct serve_job *j, char *msg, size_t len);

#endif
