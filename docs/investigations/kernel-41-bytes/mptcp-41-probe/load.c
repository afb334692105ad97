// SPDX-License-Identifier: GPL-2.0
/* Loads probe.bpf.o, attaches it, and prints its three counters once a second as one JSON
 * line until SIGINT or SIGTERM (then once more, and detaches). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void print_counts(int fd)
{
	unsigned long long v[3] = {0};

	for (unsigned int k = 0; k < 3; k++)
		bpf_map_lookup_elem(fd, &k, &v[k]);
	printf("{\"joins\": %llu, \"with_mapping\": %llu, \"mapping_moved\": %llu}\n", v[0], v[1], v[2]);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "probe.bpf.o";
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *prog;
	struct bpf_link *link;
	int fd;

	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "mptcp-41-probe: loading %s failed: %s (tracing programs need "
				"CAP_BPF+CAP_PERFMON and a kernel that allows fentry)\n", path, strerror(errno));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "finish_join");
	link = prog ? bpf_program__attach(prog) : NULL;
	if (!link) {
		fprintf(stderr, "mptcp-41-probe: attaching to __mptcp_finish_join failed: %s\n", strerror(errno));
		bpf_object__close(obj);
		return 1;
	}
	fd = bpf_object__find_map_fd_by_name(obj, "counts");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!stop) {
		print_counts(fd);
		sleep(1);
	}
	print_counts(fd);
	bpf_link__destroy(link);
	bpf_object__close(obj);
	return 0;
}
