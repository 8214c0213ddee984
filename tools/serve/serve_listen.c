/*
 * ramforge serve's listening sockets (serve_http.h): --host's addresses
 * (IPv4 or IPv6, comma-separated, as llama-server's --host takes them;
 * "[::1]" or "::1"), one libmicrohttpd daemon each on the same port, an
 * IPv6 one IPv6-only, so the server listens on what the user gave and
 * nothing else.
 */
#include "serve_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/cli.h"

/* One --host address: text as given (brackets taken off), and its socket address. */
struct listen_addr {
    char text[INET6_ADDRSTRLEN + 2];
    struct sockaddr_storage sa;
    bool v6;
};

/* --host's list into addrs (at most SERVE_HOSTS_MAX); the count, or -EINVAL said on stderr. */
static int parse_hosts(const char *list, uint16_t port, struct listen_addr *addrs)
{
    int n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        const char *a = p;
        while (len && *a == ' ')
            a++, len--;
        while (len && a[len - 1] == ' ')
            len--;
        if (len >= 2 && a[0] == '[' && a[len - 1] == ']')
            a++, len -= 2;
        struct listen_addr *l = &addrs[n < SERVE_HOSTS_MAX ? n : 0];
        struct sockaddr_in *v4 = (struct sockaddr_in *)&l->sa;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&l->sa;
        bool ok = n < SERVE_HOSTS_MAX && len > 0 && len < sizeof(l->text);
        if (ok) {
            memset(l, 0, sizeof(*l));
            memcpy(l->text, a, len);
            v4->sin_family = AF_INET;
            v4->sin_port = htons(port);
            if (inet_pton(AF_INET, l->text, &v4->sin_addr) != 1) {
                memset(&l->sa, 0, sizeof(l->sa));
                v6->sin6_family = AF_INET6;
                v6->sin6_port = htons(port);
                l->v6 = true;
                ok = inet_pton(AF_INET6, l->text, &v6->sin6_addr) == 1;
            }
        }
        if (!ok) {
            cli_error("invalid --host '%s': expected at most %d IPv4 or IPv6 addresses separated "
                      "by commas, such as 127.0.0.1,::1",
                      list, SERVE_HOSTS_MAX);
            return -EINVAL;
        }
        n++;
        p += strcspn(p, ",");
        if (!*p)
            return n;
    }
}

int serve_listen(struct serve *sv, MHD_AccessHandlerCallback on_request,
                 MHD_RequestCompletedCallback on_completed)
{
    struct listen_addr addrs[SERVE_HOSTS_MAX];
    uint16_t port = (uint16_t)sv->o->port;
    int n = parse_hosts(sv->o->host, port, addrs);
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        struct listen_addr *l = &addrs[i];
        if (l->v6)
            ((struct sockaddr_in6 *)&l->sa)->sin6_port = htons(port);
        else
            ((struct sockaddr_in *)&l->sa)->sin_port = htons(port);
        /* IPv6 without MHD_USE_DUAL_STACK: IPV6_V6ONLY, only the address given */
        struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                (l->v6 ? MHD_USE_IPv6 : 0),
            port, NULL, NULL, on_request, sv, MHD_OPTION_SOCK_ADDR, &l->sa,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)sv->o->head_timeout_s,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)SERVE_MHD_TABLE(sv->o->max_connections),
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)sv->o->max_per_address,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv, MHD_OPTION_NOTIFY_CONNECTION,
            serve_conn_notify, sv, MHD_OPTION_END);
        if (!d) {
            int e = errno;
            cli_error("cannot listen on %s%s%s:%u: %s", l->v6 ? "[" : "", l->text, l->v6 ? "]" : "",
                      port, e ? strerror(e) : "libmicrohttpd refused");
            serve_listen_stop(sv);
            return e ? -e : -EIO;
        }
        sv->daemons[sv->n_daemons++] = d;
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        if (di && port == 0)
            port = di->port; /* --port 0: every address on the port the first one got */
        fprintf(stderr, "%s: serving %s on http://%s%s%s:%u/\n", RF_PROGRAM, sv->o->sess.model,
                l->v6 ? "[" : "", l->text, l->v6 ? "]" : "", di ? di->port : (unsigned)port);
    }
    return 0;
}

void serve_listen_stop(struct serve *sv)
{
    for (size_t i = 0; i < sv->n_daemons; i++)
        MHD_stop_daemon(sv->daemons[i]);
    sv->n_daemons = 0;
}
