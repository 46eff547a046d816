// SPDX-License-Identifier: GPL-2.0
/* The clone in kernel calls that each keep within the budget; what errors mean. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <linux/fs.h>

#include "ficlonerange2.h"
#include "pcshare.h"

#define MIB (1024ULL * 1024)

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* No SA_RESTART: a pending signal must end the clone call with EINTR. */
void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Turn a clone errno into a message that names the files and an exit code. */
int clone_failed(struct clone_job *job, int e)
{
	char a[32], b[32], again[128] = "run again with --resume";
	int rc = EXIT_FAIL;
	struct stat st;

	/* Once the file grew, the same command would mean another range. */
	if (job->same_file)
		snprintf(again, sizeof(again), "run again with --offset %" PRIu64 " --length %"
			 PRIu64 " --dest-offset %" PRIu64, job->src_offset, job->length,
			 job->dest_offset);
	if (job->last_shown)
		fputc('\n', stderr);
	human(job->done, a, sizeof(a));
	human(job->length, b, sizeof(b));
	switch (e) {
	case EXDEV:
		err("%s and %s are on different filesystems or mounts: a reflink needs both on one",
		    job->src_path, job->dst_path);
		return EXIT_NOTSUP;
	case EOPNOTSUPP:
	case ENOTTY:
		err("%s: this filesystem cannot reflink (no FICLONE support)", job->dst_path);
		return EXIT_NOTSUP;
	case EINVAL:
		if (!job->started) {
			err("%s -> %s: the filesystem refuses to clone between these two files (%s)",
			    job->src_path, job->dst_path, strerror(e));
			return EXIT_NOTSUP;
		}
		/* Checked before the first chunk: what fails later likely changed since. */
		if (fstat(job->src_fd, &st) == 0 && st.st_size < job->src_st.st_size) {
			err("%s -> %s: clone failed after %s of %s: %s shrank from %jd to %jd bytes "
			    "during the clone; clone it again once it stops changing, without --resume",
			    job->src_path, job->dst_path, a, b, job->src_path,
			    (intmax_t)job->src_st.st_size, (intmax_t)st.st_size);
			return EXIT_FAIL;
		}
		break;
	case ENOSPC:
	case EDQUOT:
		err("%s: %s after %s of %s; free some space and %s", job->dst_path,
		    strerror(e), a, b, again);
		rc = EXIT_NOSPACE;
		break;
	case EINTR:
		err("%s: interrupted after %s of %s; %s to finish", job->dst_path, a, b, again);
		rc = 128 + (stop_signal ? stop_signal : SIGINT);
		break;
	}
	if (rc == EXIT_FAIL && !job->started)
		err("%s -> %s: cannot clone: %s", job->src_path, job->dst_path, strerror(e));
	else if (rc == EXIT_FAIL)
		err("%s -> %s: clone failed after %s of %s: %s", job->src_path, job->dst_path,
		    a, b, strerror(e));
	/* A record where nothing was cloned would only make --resume fail alike. */
	if (job->started && (job->done || rc != EXIT_FAIL))
		record_progress(job);
	return rc;
}

static void note_call(struct clone_job *job, double took)
{
	job->calls++;
	if (took > job->longest_call)
		job->longest_call = took;
}

static int clone_ficlonerange2(struct clone_job *job)
{
	struct file_clone_range2 args = {
		.src_fd = job->src_fd,
		.src_offset = job->src_offset,
		.src_length = job->length,
		.dest_offset = job->dest_offset,
		.budget_ms = job->budget_ms,
		.chunk_size = job->chunk,
		.done = job->done,
	};

	job->method = "ficlonerange2";
	for (;;) {
		double t = now();
		int ret = ioctl(job->dst_fd, FICLONERANGE2, &args);
		int e = errno;

		note_call(job, now() - t);
		job->done = args.done;
		if (ret < 0)
			return e;
		record_progress(job);
		show_progress(job, false);
		if (ret == 0)
			return 0;
		if (stop_signal)
			return EINTR;
	}
}

/*
 * The stock-kernel way: FICLONERANGE calls over chunks, each holding the
 * files' locks for its whole length, so the chunk is sized to take about
 * half the budget.
 */
static int clone_ficlonerange(struct clone_job *job)
{
	uint64_t chunk = job->chunk ? job->chunk : MIB;

	job->method = "ficlonerange";
	while (job->done < job->length) {
		uint64_t n = job->length - job->done;
		struct file_clone_range r;
		double t, took;

		if (n > chunk)
			n = chunk;
		r = (struct file_clone_range){
			.src_fd = job->src_fd,
			.src_offset = job->src_offset + job->done,
			.src_length = n,
			.dest_offset = job->dest_offset + job->done,
		};
		t = now();
		if (ioctl(job->dst_fd, FICLONERANGE, &r) < 0)
			return errno;
		took = now() - t;
		note_call(job, took);
		job->done += n;
		record_progress(job);
		show_progress(job, false);
		if (stop_signal && job->done < job->length)
			return EINTR;
		if (!job->chunk && job->budget_ms) {
			double target = job->budget_ms / 2000.0;

			if (took < target / 2 && chunk < (1ULL << 40))
				chunk *= 2;
			else if (took > target)
				chunk = chunk * (target / took);
			chunk -= chunk % job->block;
			if (chunk < job->block)
				chunk = job->block;
		}
	}
	return 0;
}

static int clone_ficlone(struct clone_job *job)
{
	double t = now();
	struct file_clone_range r = {
		.src_fd = job->src_fd,
		.src_offset = job->src_offset + job->done,
		.src_length = job->length - job->done,
		.dest_offset = job->dest_offset + job->done,
	};
	int ret;

	job->method = "ficlone";
	/* FICLONE proper when it is the whole file, else one FICLONERANGE. */
	if (job->src_offset == 0 && job->dest_offset == 0 && job->done == 0 &&
	    job->length == (uint64_t)job->src_st.st_size)
		ret = ioctl(job->dst_fd, FICLONE, job->src_fd);
	else
		ret = ioctl(job->dst_fd, FICLONERANGE, &r);
	if (ret < 0)
		return errno;
	note_call(job, now() - t);
	job->done = job->length;
	return 0;
}

/*
 * Within one file the clone grows the file past SRC's partial last block,
 * which is then no longer at EOF, and the kernel refuses to clone it into
 * the middle of a file: so clone it first, while it is, and the rest, now
 * block-aligned, after it.
 */
static int clone_tail_first(struct clone_job *job)
{
	uint64_t head = job->length - job->length % job->block;
	struct file_clone_range r = {
		.src_fd = job->src_fd,
		.src_offset = job->src_offset + head,
		.src_length = job->length - head,
		.dest_offset = job->dest_offset + head,
	};
	double t = now();

	if (!job->same_file || head == job->length)
		return 0;
	if (ioctl(job->dst_fd, FICLONERANGE, &r) < 0)
		return errno;
	note_call(job, now() - t);
	job->tail = r.src_length;
	job->length = head;
	return 0;
}

/* After plan_clone(): the whole clone, or up to the error that ends it. */
int clone_run(struct clone_job *job, bool one_call, bool use2)
{
	int ret;

	job->done_before = job->done;
	job->start = now();
	if (one_call) {
		ret = job->done < job->length ? clone_ficlone(job) : 0;
	} else {
		ret = clone_tail_first(job);
		if (!ret && job->done < job->length)
			ret = use2 ? clone_ficlonerange2(job) : clone_ficlonerange(job);
	}
	job->length += job->tail;
	job->done += job->tail;
	if (ret)
		return clone_failed(job, ret);
	show_progress(job, true);
	fremovexattr(job->dst_fd, RESUME_XATTR);
	return EXIT_OK;
}
