/*
 * ramforge run: greedy generation under the memory ledger and a residency
 * policy. Option parsing, printing and exit codes only: the boundary
 * sequence is the session layer's (ramforge/session.h):
 *   rf_session_load (load, probe, after_load boundary) -> rf_session_admit
 *   -> rf_session_stage -> forge_generate (end_of_session sample) ->
 *   after_session boundary -> optional verify session and after_verify
 *   boundary -> rf_session_operation_end -> the reports.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/omp_env.h"
#include "ramforge/core/residency.h"
#include "ramforge/core/stream_window.h"
#include "ramforge/core/streaming.h"
#include "ramforge/core/timing.h"
#include "ramforge/error.h"
#include "ramforge/forge/forge_ahead.h"
#include "ramforge/forge/forge_observer.h"
#include "ramforge/forge/forge_routing.h"
#include "ramforge/forge/forge_window.h"
#include "ramforge/session/host.h"
#include "ramforge/session/metrics.h"
#include "ramforge/session/session_ext.h"
#include "ramforge/sys/sys.h"
#include "ramforge/tools/defaults.h"
#include "run.h"

/* forge_generate's hook data. */
struct run_hook {
    struct rf_session *s;
    struct run_svg *svg; /* --residency-svg; NULL: none */
};

/* forge_generate's hook: the session's context is alive, its buffers allocated. */
static void end_of_session(void *user_data)
{
    struct run_hook *h = user_data;
    rf_session_boundary(h->s, RF_BOUNDARY_END_OF_SESSION);
    if (h->svg)
        run_svg_take(h->svg, h->s, "end_of_session");
}

/* The session parameters of the options: the shared ones', then run's own. */
static struct rf_session_params session_params(const struct run_options *o, uint64_t t_entry)
{
    struct rf_session_params p = session_options_params(&o->sess, t_entry);
    p.release_dead_file_pages = o->release_dead_file_pages;
    p.page_budget_pages = (uint64_t)o->page_budget;
    p.admission_mode = o->admission;
    p.probe_access = o->access_probe;
    p.sample_smaps = o->sample_smaps;
    p.mlock_requested = o->mlock;
    p.stream_window_bytes = o->stream_window;
    p.stream_sequential = o->stream_sequential;
    p.stream_hugepage = o->stream_hugepage;
    p.stream_read_ahead_slots = (uint32_t)o->stream_read_ahead;
    return p;
}

/* The host's read-ahead window (*w NULL when none); a failure is a warning, the run streams
   through the mapping. */
static void window_open(struct rf_session *s, struct forge_window **w)
{
    int rc = rf_session_stream_window_open(s, w);
    if (rc < 0)
        cli_warn_no_window(rc);
}

/* The read-ahead's and the decode's figures, for the report's streaming object. */
static void stream_figures(struct rf_session *s, struct forge_ahead *ahead, uint32_t distance,
                           const struct forge_generate_result *gen)
{
    struct rf_stream_decode d = {
        .decode_ns = gen->decode_ns,
        .tokens = gen->n_tokens > 1 ? gen->n_tokens - 1 : 0,
        .has_io = gen->has_decode_io,
        .read_bytes = gen->decode_read_bytes,
        .major_faults = gen->decode_major_faults,
        .has_cpu = gen->has_decode_cpu,
        .user_ns = gen->decode_user_ns,
        .system_ns = gen->decode_system_ns,
        .omp_wait_policy = getenv("OMP_WAIT_POLICY"),
        .gomp_spincount = getenv("GOMP_SPINCOUNT"),
    };
    rf_session_stream_decode(s, &d);
    if (!ahead)
        return;
    struct forge_ahead_stats as;
    forge_ahead_stats(ahead, &as);
    struct rf_stream_prefetch sp = {
        .on = true,
        .distance = distance,
        .layers_posted = as.layers_posted,
        .layers_prefetched = as.layers_prefetched,
        .requested_bytes = as.requested_bytes,
        .failed_calls = as.failed_calls,
    };
    rf_session_stream_prefetch(s, &sp);
}

/* The summary and the reports asked for; sh (--memory-limit's parent) hears of the JSON one. */
static int write_reports(struct rf_session *s, const struct run_options *o, struct run_shared *sh)
{
    if (o->human_report)
        run_print_report(rf_session_report(s, RF_REPORT_OPERATION), o->sess.verbose);
    else if (!o->sess.quiet)
        run_print_summary(stderr, rf_session_report(s, RF_REPORT_OPERATION));
    if (run_json_to_stdout(o)) {
        char *text = NULL;
        int rc = rf_session_report_json(s, RF_REPORT_OPERATION, &text);
        if (rc < 0) {
            cli_error("cannot write the JSON report to standard output: %s", rf_strerror(rc));
            return rc;
        }
        rc = run_put_json(text); /* a failure is reported by cli_finish_stdout */
        free(text);
        if (rc < 0)
            return rc;
    } else if (o->sess.json_path) {
        int rc = rf_session_report_write(s, RF_REPORT_OPERATION, o->sess.json_path);
        if (rc < 0) {
            cli_error("cannot write %s: %s", o->sess.json_path, rf_strerror(rc));
            return rc;
        }
    }
    run_shared_written(sh);
    if (o->metrics_path) {
        char *text = NULL;
        int rc = rf_session_metrics_text(s, o->sess.model, &text);
        if (rc == 0)
            rc = rf_metrics_write_file(text, o->metrics_path);
        free(text);
        if (rc < 0) {
            cli_error("cannot write %s: %s", o->metrics_path, rf_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/*
 * Admission from the GGUF header before the load: a run the load alone
 * would get killed for is refused before llama.cpp maps the file (exit 1;
 * the JSON report says so, every loaded-model section null with the
 * reason). Returns false to stop. The decision is recorded in sh (--memory-limit).
 */
static bool admit_before_load(const struct run_options *o, struct rf_session_params p,
                              struct rf_admission_result *adm, bool *decided_out,
                              struct run_shared *sh)
{
    /* No tokenizer before the load: at most one token per byte, plus BOS and EOS. */
    size_t bytes = strlen(o->prompt);
    struct rf_operation_request req = {.n_ctx = (uint32_t)o->sess.n_ctx,
                                       .n_prompt = bytes > UINT32_MAX - 2 ? UINT32_MAX
                                                                          : (uint32_t)bytes + 2,
                                       .n_predict = (uint32_t)o->sess.n_predict};
    char err[FORGE_ERR_MAX];
    bool go = true;
    int ret = rf_session_preload_admit(o->sess.model, o->repack, p, &req, adm, decided_out, err);
    if (ret < 0) {
        cli_error("%s", err);
        go = false;
    } else if (!*decided_out) {
        /* no enforced limit: nothing to decide before the load */
    } else if (adm->refused) {
        run_shared_admission(sh, adm);
        run_print_admission(adm, " before loading", o->sess.verbose);
        go = false;
        int rc = 0;
        if (run_json_to_stdout(o)) {
            char *text = NULL;
            rc = rf_session_preload_report_json(o->sess.model, p, adm, &text);
            if (rc == 0)
                rc = run_put_json(text);
            free(text);
        } else if (o->sess.json_path) {
            rc = rf_session_preload_report_write(o->sess.model, p, adm, o->sess.json_path);
        }
        if (rc < 0)
            cli_error("cannot write %s: %s", o->sess.json_path, rf_strerror(rc));
        else
            run_shared_written(sh);
    } else {
        run_shared_admission(sh, adm);
        if (adm->outcome != RF_ADMIT_ADMITTED && o->sess.verbose)
            /* Without -v said once, by the admission after the load (the report keeps both). */
            run_print_admission(adm, " before loading", true);
    }
    return go;
}

/* The measured mapping RSS after release against the soft target, on stderr (one line). */
static void warn_above_target(struct rf_session *s)
{
    const struct rf_report *r = rf_session_report(s, RF_REPORT_OPERATION);
    const struct rf_residency_sample *last = r->n_samples ? &r->samples[r->n_samples - 1] : NULL;
    if (r->policy_mutates && r->plan && r->plan->has_soft_target && last && last->has_mapping &&
        last->mapping_rss_bytes > r->plan->soft_target_bytes) {
        char b1[32], b2[32];
        cli_error("warning: the measured mapping RSS of %s is above the soft target of %s (the "
                  "plan's reason: --residency-report)",
                  cli_format_bytes(last->mapping_rss_bytes, false, b1, sizeof(b1)),
                  cli_format_bytes(r->plan->soft_target_bytes, false, b2, sizeof(b2)));
    }
}

/* --profile: reads the persisted profile; a rejected one is one warning line. */
static bool open_profile(struct rf_session *s, const struct run_options *o)
{
    char err[RF_SESSION_PROFILE_ERR_MAX];
    bool used = false;
    int rc = rf_session_profile_open(s, o->sess.profile_path, (size_t)o->sess.profile_history,
                                     &used, err);
    if (rc < 0) {
        cli_error("cannot use profile %s: %s", o->sess.profile_path, rf_strerror(rc));
        return false;
    }
    if (!used && err[0])
        cli_error("warning: %s", err);
    return true;
}

/* --profile: saves it; false (exit 1 after the reports) when the write failed. */
static bool save_profile(struct rf_session *s)
{
    char err[RF_SESSION_PROFILE_ERR_MAX];
    bool saved = false;
    int rc = rf_session_profile_save(s, &saved, err);
    if (rc == 0 && !saved && err[0])
        cli_error("warning: profile %s", err);
    if (rc < 0)
        cli_error("%s", err);
    return rc >= 0;
}

int cmd_run(int argc, char **argv)
{
    uint64_t t_entry = rf_now_ns();
    struct run_options o = {
        .prompt = RF_DEFAULT_PROMPT,
        .sess = {.n_predict = 32, .policy = RF_POLICY_OBSERVE},
        .repack = true,
        .release_dead_file_pages = true,
        .page_budget = (long long)RF_RESIDENCY_DEFAULT_BUDGET_PAGES,
        .dispatch_events = 32768,
        .stream_sequential = true,
        .stream_hugepage = true,
        .stream_read_ahead = RF_STREAM_READ_AHEAD_DEFAULT_SLOTS,
    };
    struct forge_model_params mp = forge_model_default_params();
    struct forge_generate_result gen = {0}, verify = {0};
    struct forge_observer *observer = NULL;
    struct forge_routing *routing = NULL;
    struct forge_ahead *ahead = NULL;
    struct forge_window *window = NULL;
    struct rf_session *s = NULL;
    struct rf_admission_result *pre = NULL; /* the decision before the load */
    struct run_shared *sh = NULL;           /* --memory-limit: what the parent hears */
    struct run_svg svg;
    struct run_hook hook = {0};
    bool pre_decided = false, profile_failed = false;
    char err[FORGE_ERR_MAX];
    int status = RF_EXIT_FAILURE, rc;

    rc = run_parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* libgomp's wait under streaming (omp_env.h): not with the prompt from standard input,
       read once (the environment must say it then) */
    if (o.sess.policy == RF_POLICY_STREAMING && !o.stream_spin_wait && !o.prompt_from_stdin &&
        cli_file_over_limit(&o.sess))
        cli_exec_streaming_omp_env(argc, argv);
    run_warn_unused_options(&o);
    cli_default_threads(&o.sess.n_threads);
    const bool observing = o.sess.policy != RF_POLICY_OFF;
    if (o.sess.json_path && !run_json_to_stdout(&o) &&
        !run_report_path_usable(o.sess.json_path, o.sess.model))
        return RF_EXIT_FAILURE;
    if (o.metrics_path && !run_report_path_usable(o.metrics_path, o.sess.model))
        return RF_EXIT_FAILURE;
    if (o.svg_path && !run_report_path_usable(o.svg_path, o.sess.model))
        return RF_EXIT_FAILURE;
    if (o.sess.has_memory_limit && (rc = run_supervise(&o, session_params(&o, t_entry), &sh)) >= 0)
        return rc; /* the parent: the run was the child's, in the cgroup */
    run_svg_init(&svg);
    if (o.sess.verbose)
        rf_log_set(cli_log_sink, NULL);
    forge_init(o.sess.verbose);
    pre = calloc(1, sizeof(*pre));
    if (!pre) {
        cli_error("out of memory");
        return RF_EXIT_FAILURE;
    }
    run_shared_stage(sh, "deciding admission before the load");
    if (observing && o.admission != RF_ADMISSION_OFF &&
        !admit_before_load(&o, session_params(&o, t_entry), pre, &pre_decided, sh)) {
        free(pre);
        return RF_EXIT_FAILURE;
    }

    mp.use_extra_bufts = o.repack;
    mp.mlock = o.mlock;
    mp.probe_access = observing && (rf_policy_mutates(o.sess.policy) || o.access_probe);
    mp.placement_access = observing;
    mp.n_threads = (int)o.sess.n_threads;
    run_shared_stage(sh, "loading the model");
    rc = rf_session_load(o.sess.model, &mp, session_params(&o, t_entry), &s, err);
    if (rc < 0) {
        cli_error("%s", err);
        free(pre);
        return RF_EXIT_FAILURE;
    }
    if (pre_decided && (rc = rf_session_set_preload_admission(s, pre)) < 0) {
        cli_error("cannot record the admission before the load: %s", rf_strerror(rc));
        goto out;
    }
    hook = (struct run_hook){.s = s, .svg = o.svg_path ? &svg : NULL};
    if (o.svg_path)
        run_svg_take_after_load(&svg, s);
    if (o.sess.profile_path && !open_profile(s, &o))
        goto out;
    if (observing) {
        struct rf_operation_start_params sp = {
            .request = {.n_ctx = (uint32_t)o.sess.n_ctx, .n_predict = (uint32_t)o.sess.n_predict},
            .admit = true,
            .staging_budget_bytes = o.sess.has_staging ? o.sess.staging_budget : 0,
            .stage_always = true, /* one operation: its staging is a cold start's */
        };
        struct rf_operation_start st;
        const struct rf_admission_result *adm = &st.admission;
        forge_tokenize_count(rf_session_forge_model(s), o.prompt, &sp.request.n_prompt);
        run_shared_stage(sh, "deciding admission after the load");
        rf_session_operation_start(s, &sp, &st);
        if (st.admission_decided)
            run_shared_admission(sh, adm);
        if (st.admission_decided && adm->lock_note[0])
            cli_error("warning: %s", adm->lock_note);
        if (st.refused) {
            run_print_admission(adm, "", o.sess.verbose);
            rf_session_operation_end(s, NULL);
            write_reports(s, &o, sh);
            goto out;
        }
        /* A releasing policy's soft target is judged after the release (warn_above_target). */
        if (st.admission_decided && adm->outcome != RF_ADMIT_ADMITTED &&
            !(adm->cause == RF_ADMIT_CAUSE_SOFT_TARGET && rf_policy_mutates(o.sess.policy)))
            run_print_admission(adm, "", o.sess.verbose);
        if (st.staging_error < 0) {
            cli_error("%s: cannot plan staging: %s", o.sess.model, rf_strerror(st.staging_error));
            goto out;
        }
        bool pinned = st.pinned;
        if (st.pin_error == 0) {
            const struct rf_stream_report *sr =
                rf_session_report(s, RF_REPORT_OPERATION)->streaming;
            char b1[32], b2[32], b3[32];
            if (!pinned && sr && sr->fallback)
                cli_error("warning: streaming: %s (%s): the pins were undone and every weight "
                          "streams (plain behaviour)",
                          sr->pin_error_reason, rf_strerror(sr->pin_error));
            else if (pinned && sr && sr->partial)
                cli_error("warning: streaming: RLIMIT_MEMLOCK is below the plan's pins (%s of "
                          "%s): %s pinned, the rest streams through the page cache",
                          cli_format_bytes(sr->memlock_limit_bytes, false, b1, sizeof(b1)),
                          cli_format_bytes(sr->pin_requested_bytes, false, b2, sizeof(b2)),
                          cli_format_bytes(sr->pin_accepted_bytes, false, b3, sizeof(b3)));
        }
    }

    struct forge_generate_params gp = {
        .prompt = o.prompt,
        .n_predict = (int32_t)o.sess.n_predict,
        .n_ctx = (uint32_t)o.sess.n_ctx,
        .n_threads = (int32_t)o.sess.n_threads,
        .on_session_end = observing ? end_of_session : NULL,
        .user_data = &hook,
    };
    if (o.observe_dispatch) {
        rc = forge_observer_create((size_t)o.dispatch_events, &observer);
        if (rc < 0) {
            cli_error("cannot allocate the dispatch observer (%lld events): %s", o.dispatch_events,
                      rf_strerror(rc));
            goto out;
        }
        rc = forge_observer_set_sampling(observer, rf_session_forge_model(s),
                                         (uint32_t)o.dispatch_sample_pages);
        if (rc < 0) {
            cli_error("cannot set up pre-dispatch sampling: %s", rf_strerror(rc));
            goto out;
        }
        gp.observer = observer;
    }
    if (o.sess.policy == RF_POLICY_STREAMING && o.stream_prefetch > 0 &&
        (rc = forge_ahead_create(rf_session_forge_model(s), (uint32_t)o.stream_prefetch, &ahead)) <
            0)
        cli_error("warning: streaming: no layer-ahead prefetch: %s", rf_strerror(rc));
    gp.ahead = ahead;
    if (o.sess.policy == RF_POLICY_STREAMING)
        window_open(s, &window);
    gp.window = window;
    struct forge_model_info info;
    forge_model_get_info(rf_session_forge_model(s), &info);
    if (observing && info.n_expert &&
        (rc = forge_routing_create(rf_session_forge_model(s), &routing)) < 0)
        cli_error("warning: the MoE routing is not observed: %s", rf_strerror(rc));
    gp.routing = routing; /* residency.experts of the report (docs/MOE.md) */
    run_shared_stage(sh, "generating (the first session)");
    if (forge_generate(rf_session_forge_model(s), &gp, &gen, err) < 0) {
        cli_error("%s: %s", o.sess.model, err);
        goto out;
    }
    run_shared_stage(sh, "ending the operation and writing its reports");
    stream_figures(s, ahead, (uint32_t)o.stream_prefetch, &gen);
    if (routing && (rc = rf_session_routing_set(s, forge_routing_stats(routing))) < 0) {
        cli_error("cannot keep the MoE routing: %s", rf_strerror(rc));
        goto out;
    }
    if (observer && (rc = rf_session_dispatch_trace(s, observer)) < 0) {
        cli_error("cannot attribute the dispatch trace: %s", rf_strerror(rc));
        goto out;
    }
    if (observing) {
        rc = rf_session_boundary(s, RF_BOUNDARY_AFTER_SESSION);
        if (rc == 0 && o.verify) {
            gp.observer = NULL; /* the verify session runs without the observer */
            gp.routing = NULL;
            gp.ahead = NULL;
            gp.on_session_end = NULL;
            if (forge_generate(rf_session_forge_model(s), &gp, &verify, err) < 0) {
                cli_error("%s: verify session: %s", o.sess.model, err);
                goto out;
            }
            /* The verify session re-faulted pages: its boundary is a safe one too. */
            rc = rf_session_boundary(s, RF_BOUNDARY_AFTER_VERIFY);
        }
        if (rc < 0) {
            cli_error("%s: cannot plan: %s", o.sess.model, rf_strerror(rc));
            goto out;
        }
    }
    rf_session_stream_window_close(s, window); /* both sessions', with --verify-session */
    window = NULL;
    struct rf_operation_output out = rf_session_output_of(&gen, (uint32_t)o.seed);
    if (o.verify) {
        out.verify_tokens = verify.tokens;
        out.n_verify_tokens = verify.n_tokens;
    }
    rc = rf_session_operation_end(s, &out);
    if (rc < 0) {
        cli_error("%s: cannot end the operation: %s", o.sess.model, rf_strerror(rc));
        goto out;
    }
    if (!o.human_report) /* the report's warnings say it (one warning, not two) */
        warn_above_target(s);
    if (o.sess.profile_path && !save_profile(s))
        profile_failed = true;

    /* With the JSON report on stdout, stdout holds only it: the text goes to stderr. */
    fprintf(run_json_to_stdout(&o) ? stderr : stdout, "%s\n", gen.text);
    cli_flush_stdout(); /* a failure is reported at exit by cli_finish_stdout */
    if (write_reports(s, &o, sh) < 0)
        goto out;
    if (o.svg_path && run_svg_write(&svg, s, o.svg_path) < 0)
        goto out;
    if (rf_session_report(s, RF_REPORT_OPERATION)->verified &&
        !rf_session_report(s, RF_REPORT_OPERATION)->verify_tokens_equal) {
        cli_error("the verify session's tokens differ from the first session's");
        goto out;
    }
    if (o.hold) {
        char buf[256];
        fprintf(stderr, "%s: holding pid %ld with the model loaded; close standard input to exit\n",
                RF_PROGRAM, (long)getpid());
        while (fread(buf, 1, sizeof(buf), stdin) > 0)
            ;
    }
    status = profile_failed ? RF_EXIT_FAILURE : 0;
out:
    forge_generate_result_free(&gen);
    forge_generate_result_free(&verify);
    forge_observer_free(observer);
    forge_routing_free(routing);
    forge_ahead_free(ahead);
    forge_window_free(window);
    run_svg_free(&svg);
    rf_session_free(s);
    free(pre);
    return status;
}
