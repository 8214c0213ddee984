/*
 * A Prometheus /metrics endpoint of the CLI's own (libmicrohttpd, one
 * internal polling thread): `watch --listen` publishes its latest reading,
 * `exec --metrics-listen` renders its text at each scrape.
 */
#ifndef RAMFORGE_METRICS_LISTEN_H
#define RAMFORGE_METRICS_LISTEN_H

#include <netinet/in.h>
#include <stdbool.h>

/* The text of one scrape, a new string the endpoint frees; NULL: answer 500. */
typedef char *(*metrics_render_fn)(void *ud);

/*
 * Parses ADDR_PORT as metrics_listen_start does into *out: 0, or -EINVAL
 * after the one-line usage error naming option.
 */
int metrics_listen_parse(const char *option, const char *addr_port, bool default_host,
                         struct sockaddr_in *out);

/*
 * Listens on ADDR_PORT ("ADDR:PORT", ADDR an IPv4 address; with
 * default_host, a bare "PORT" is 127.0.0.1:PORT) for GET /metrics. option
 * names the option in the one-line usage error (bad address: -EINVAL);
 * cannot listen: said, -errno. render NULL: serves the text last given to
 * metrics_listen_publish ("" before that); else render(ud) at each scrape,
 * on the endpoint's thread.
 */
int metrics_listen_start(const char *option, const char *addr_port, bool default_host,
                         metrics_render_fn render, void *ud);

/* The text served from now on (render NULL); takes ownership of text. */
void metrics_listen_publish(char *text);

/* Stops listening and frees the published text; without an endpoint a no-op. */
void metrics_listen_stop(void);

#endif
