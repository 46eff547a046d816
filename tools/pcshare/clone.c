// SPDX-License-Identifier: GPL-2.0
/* pcshare clone: its options, then plan, clone and report, in that order. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <sys/xattr.h>

#include "pcshare.h"

static int run_clone(struct clone_job *job, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "length", required_argument, NULL, 'l' },
		{ "dest-offset", required_argument, NULL, 'd' },
		{ "budget-ms", required_argument, NULL, 'b' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "method", required_argument, NULL, 'm' },
		{ "resume", no_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	bool quiet = false, have_range = false, have_doff = false, have_budget = false;
	bool one_call, use2 = false;
	const char *method = "auto";
	int c, li, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hq", opts, &li)) != -1) {
		uint64_t *target = NULL;

		switch (c) {
		case 'o': target = &job->src_offset; have_range = true; break;
		case 'l': target = &job->length; have_range = true; break;
		case 'd': target = &job->dest_offset; have_doff = true; break;
		case 'b': target = &job->budget_ms; have_budget = true; break;
		case 'c': target = &job->chunk; break;
		case 'm': method = optarg; break;
		case 'r': job->resume = true; break;
		case 'q': quiet = true; break;
		case 'j': break;
		case 'h': usage(stdout); return -1;
		default: return bad_option(argv, c);
		}
		if (target && parse_size(optarg, target, c != 'b'))
			return usage_error("--%s: '%s' is not %s", opts[li].name, optarg,
					   c == 'b' ? "a number of milliseconds" : "a size");
	}
	if (argc - optind > 2)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);
	if (argc - optind < 2)
		return usage_error("clone needs SRC and DST");
	if (strcmp(method, "auto") && strcmp(method, "ficlonerange2") &&
	    strcmp(method, "ficlonerange") && strcmp(method, "ficlone"))
		return usage_error("--method: '%s' is none of auto, ficlonerange2, ficlonerange, ficlone",
				   method);
	/* Refuse what cannot be honoured rather than quietly do something else. */
	one_call = !strcmp(method, "ficlone") || job->budget_ms == 0;
	if (one_call && job->chunk)
		return usage_error("--chunk: %s clones in one call, not in chunks",
				   job->budget_ms ? "--method ficlone" : "--budget-ms 0");
	if (!strcmp(method, "ficlone") && have_budget && job->budget_ms)
		return usage_error("--budget-ms: --method ficlone clones in one call, "
				   "which no budget can cut short");
	if (!job->budget_ms && (!strcmp(method, "ficlonerange") || !strcmp(method, "ficlonerange2")))
		return usage_error("--budget-ms 0 means one call, but --method %s clones in steps",
				   method);
	if (job->resume && (have_range || have_doff))
		return usage_error("--resume takes the range from DST's record; drop --offset/--length/--dest-offset");
	job->src_path = argv[optind];
	if (!have_doff)
		job->dest_offset = job->src_offset;

	rc = plan_clone(job, argv[optind + 1], method, !have_range && !have_doff && !job->resume,
			&use2);
	if (rc)
		return rc;

	/* From here on DST changes. */
	catch_signals();
	job->started = true;
	if (!job->resume) {
		/* An older record would claim data that this clone replaces. */
		fremovexattr(job->dst_fd, RESUME_XATTR);
		if (!have_range && !have_doff && ftruncate(job->dst_fd, 0) < 0) {
			err("%s: %s", job->dst_path, strerror(errno));
			return EXIT_FAIL;
		}
	}
	job->progress = !quiet && isatty(STDERR_FILENO);
	return clone_run(job, one_call, use2);
}

int cmd_clone(int argc, char **argv)
{
	struct clone_job job = {
		.src_fd = -1, .dst_fd = -1, .budget_ms = DEFAULT_BUDGET_MS, .method = "none",
	};
	int rc = run_clone(&job, argc, argv);

	if (rc < 0)
		return EXIT_OK;		/* --help */
	/* A refused clone leaves no trace, not even the DST it created. */
	if (rc && !job.started)
		remove_created_dst(&job);
	if (json) {
		json_begin(rc);
		json_field("src", job.src_path);
		json_field("dst", job.dst_path[0] ? job.dst_path : NULL);
		json_field("method", job.method);
		printf(", \"bytes\": %" PRIu64 ", \"bytes_done\": %" PRIu64
		       ", \"bytes_total\": %" PRIu64 ", \"seconds\": %.6f, \"calls\": %lu"
		       ", \"longest_call_ms\": %.3f}\n",
		       job.done - job.done_before, job.done, job.length,
		       job.start ? now() - job.start : 0.0, job.calls, job.longest_call * 1000);
	}
	return rc;
}
