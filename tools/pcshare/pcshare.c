// SPDX-License-Identifier: GPL-2.0
/*
 * pcshare: clone files without stalling their readers, and show the btrfs
 * shared extent cache's counters. See pcshare(1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <linux/btrfs.h>
#include <linux/magic.h>

#include "ficlonerange2.h"

/* Exit codes, documented in pcshare(1). */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,		/* I/O error, missing file, anything else */
	EXIT_USAGE = 2,		/* bad arguments, misaligned or invalid range */
	EXIT_NOTSUP = 3,	/* no reflink here: other filesystems, no support, no cache */
	EXIT_NOSPACE = 4,	/* ENOSPC or EDQUOT part way; --resume continues */
	EXIT_INTERRUPTED = 130,	/* SIGINT/SIGTERM; --resume continues */
};

#define RESUME_XATTR "user.pcshare.clone"
#define DEFAULT_BUDGET_MS 100
#define MIB (1024ULL * 1024)

static const char *prog = "pcshare";
static volatile sig_atomic_t stop_signal;

static void usage(FILE *f)
{
	fprintf(f,
"usage: pcshare clone SRC DST [--offset N] [--length N] [--dest-offset N]\n"
"                     [--budget-ms N] [--chunk N] [--method M] [--resume]\n"
"                     [--quiet] [--json]\n"
"       pcshare stat MOUNTPOINT [--json]\n"
"       pcshare --help | --version\n"
"\n"
"clone  reflink SRC (or a range of it) into DST in short steps, so that\n"
"       readers and writers of both files never wait long. Uses FICLONERANGE2\n"
"       where the kernel has it, else a FICLONERANGE loop whose chunk adapts\n"
"       to the budget. Sizes take K, M, G, T suffixes (powers of 1024).\n"
"  --offset N       start in SRC (default 0)\n"
"  --length N       bytes to clone (default: to SRC's end)\n"
"  --dest-offset N  start in DST (default: same as --offset)\n"
"  --budget-ms N    longest time one kernel call may hold the files (default %d;\n"
"                   0: clone in one call, like cp --reflink)\n"
"  --chunk N        fixed chunk size instead of an adaptive one\n"
"  --method M       auto (default), ficlonerange2, ficlonerange or ficlone\n"
"  --resume         continue the interrupted clone recorded on DST\n"
"  --quiet          no progress bar\n"
"  --json           print a JSON summary on stdout\n"
"\n"
"stat   the shared extent cache counters of a btrfs mount\n"
"\n"
"exit: 0 done, 1 failed, 2 usage or invalid range, 3 reflink or cache not\n"
"available there, 4 out of space, 130 interrupted (DST can be resumed).\n",
		DEFAULT_BUDGET_MS);
}

static void err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	if (*s == '-' || !*s)
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B' && shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static const char *human(uint64_t bytes, char *buf, size_t len)
{
	const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = bytes;
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, unit[i]);
	return buf;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* No SA_RESTART: a pending signal must end the clone call with EINTR. */
static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

struct clone_job {
	const char *src_path, *dst_path;
	int src_fd, dst_fd;
	dev_t src_dev;
	ino_t src_ino;
	uint64_t src_offset, length, dest_offset, done;
	uint64_t chunk;		/* fixed chunk, 0 = adaptive */
	uint64_t budget_ms;
	uint64_t block;		/* alignment of the loop's chunks */
	const char *method;	/* what actually ran */
	unsigned long calls;
	double longest_call;	/* seconds */
	bool progress;
	double last_record;
};

static void record_progress(struct clone_job *job, bool force)
{
	char val[256];
	double t = now();

	if (!force && t - job->last_record < 1.0)
		return;
	job->last_record = t;
	snprintf(val, sizeof(val), "1 %ju %ju %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
		 (uintmax_t)job->src_dev, (uintmax_t)job->src_ino, job->src_offset,
		 job->length, job->dest_offset, job->done);
	/* Best effort: without xattrs only --resume is lost, not the clone. */
	fsetxattr(job->dst_fd, RESUME_XATTR, val, strlen(val), 0);
}

static int load_progress(struct clone_job *job)
{
	char val[256];
	uintmax_t dev, ino;
	uint64_t off, len, doff, done;
	ssize_t n;
	int ver;

	n = fgetxattr(job->dst_fd, RESUME_XATTR, val, sizeof(val) - 1);
	if (n < 0) {
		err("%s: no interrupted clone to resume (%s)", job->dst_path,
		    errno == ENODATA ? "nothing recorded" : strerror(errno));
		return EXIT_FAIL;
	}
	val[n] = 0;
	if (sscanf(val, "%d %ju %ju %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
		   &ver, &dev, &ino, &off, &len, &doff, &done) != 7 || ver != 1) {
		err("%s: unreadable resume record '%s'", job->dst_path, val);
		return EXIT_FAIL;
	}
	if (dev != job->src_dev || ino != job->src_ino) {
		err("%s: the interrupted clone came from another file than %s",
		    job->dst_path, job->src_path);
		return EXIT_USAGE;
	}
	job->src_offset = off;
	job->length = len;
	job->dest_offset = doff;
	job->done = done;
	return EXIT_OK;
}

static void show_progress(struct clone_job *job, bool final)
{
	char a[32], b[32];
	int width = 30, fill;
	double frac = job->length ? (double)job->done / job->length : 1.0;

	if (!job->progress)
		return;
	fill = frac * width;
	fprintf(stderr, "\r[%.*s%*s] %5.1f%% %s / %s", fill,
		"##############################", width - fill, "", frac * 100,
		human(job->done, a, sizeof(a)), human(job->length, b, sizeof(b)));
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}

/* Turn a clone errno into a message that names the files and an exit code. */
static int clone_failed(struct clone_job *job, int e)
{
	char a[32], b[32];

	if (job->progress)
		fputc('\n', stderr);
	switch (e) {
	case EXDEV:
		err("%s and %s are on different filesystems: a reflink needs both on one",
		    job->src_path, job->dst_path);
		return EXIT_NOTSUP;
	case EOPNOTSUPP:
	case ENOTTY:
		err("%s: this filesystem cannot reflink (no FICLONE support)", job->dst_path);
		return EXIT_NOTSUP;
	case EINVAL:
		err("%s -> %s: invalid range: offsets must be multiples of the block size (%" PRIu64
		    "), the range must lie within the source and, in one file, not overlap",
		    job->src_path, job->dst_path, job->block);
		return EXIT_USAGE;
	case ENOSPC:
	case EDQUOT:
		record_progress(job, true);
		err("%s: %s after %s of %s; free some space and run again with --resume",
		    job->dst_path, strerror(e), human(job->done, a, sizeof(a)),
		    human(job->length, b, sizeof(b)));
		return EXIT_NOSPACE;
	case EINTR:
		record_progress(job, true);
		err("%s: interrupted after %s of %s; run again with --resume to finish",
		    job->dst_path, human(job->done, a, sizeof(a)),
		    human(job->length, b, sizeof(b)));
		return EXIT_INTERRUPTED;
	default:
		record_progress(job, true);
		err("%s -> %s: clone failed: %s", job->src_path, job->dst_path, strerror(e));
		return EXIT_FAIL;
	}
}

static void note_call(struct clone_job *job, double took)
{
	job->calls++;
	if (took > job->longest_call)
		job->longest_call = took;
}

/* 1: the kernel has no FICLONERANGE2; 0: done; else an errno. */
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

	for (;;) {
		double t = now();
		int ret = ioctl(job->dst_fd, FICLONERANGE2, &args);
		int e = errno;

		note_call(job, now() - t);
		job->done = args.done;
		if (ret < 0 && (e == ENOTTY || e == ENOSYS) && job->calls == 1)
			return 1;
		job->method = "ficlonerange2";
		if (ret < 0)
			return e;
		record_progress(job, false);
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
 * the budget.
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
		record_progress(job, false);
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
	    job->length == (uint64_t)lseek(job->src_fd, 0, SEEK_END))
		ret = ioctl(job->dst_fd, FICLONE, job->src_fd);
	else
		ret = ioctl(job->dst_fd, FICLONERANGE, &r);
	if (ret < 0)
		return errno;
	note_call(job, now() - t);
	job->done = job->length;
	return 0;
}

static int cmd_clone(int argc, char **argv)
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
	struct clone_job job = { .budget_ms = DEFAULT_BUDGET_MS, .method = "none" };
	bool resume = false, quiet = false, json = false, have_doff = false;
	bool have_range = false;
	const char *method = "auto";
	struct stat sst, dst_st;
	struct statfs sfs;
	uint64_t src_size;
	double t0;
	int c, li = 0, ret, rc;

	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		uint64_t *target = NULL;

		switch (c) {
		case 'o': target = &job.src_offset; have_range = true; break;
		case 'l': target = &job.length; have_range = true; break;
		case 'd': target = &job.dest_offset; have_doff = true; break;
		case 'b': target = &job.budget_ms; break;
		case 'c': target = &job.chunk; break;
		case 'm': method = optarg; break;
		case 'r': resume = true; break;
		case 'q': quiet = true; break;
		case 'j': json = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
		if (target && parse_size(optarg, target)) {
			err("--%s: '%s' is not a size", opts[li].name, optarg);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(method, "auto") && strcmp(method, "ficlonerange2") &&
	    strcmp(method, "ficlonerange") && strcmp(method, "ficlone")) {
		err("--method: '%s' is none of auto, ficlonerange2, ficlonerange, ficlone", method);
		return EXIT_USAGE;
	}
	if (resume && (have_range || have_doff)) {
		err("--resume takes the range from DST's record; drop --offset/--length/--dest-offset");
		return EXIT_USAGE;
	}
	job.src_path = argv[optind];
	job.dst_path = argv[optind + 1];
	if (!have_doff)
		job.dest_offset = job.src_offset;

	job.src_fd = open(job.src_path, O_RDONLY | O_CLOEXEC);
	if (job.src_fd < 0 || fstat(job.src_fd, &sst) < 0) {
		err("%s: %s", job.src_path, strerror(errno));
		return EXIT_FAIL;
	}
	if (!S_ISREG(sst.st_mode)) {
		err("%s: not a regular file", job.src_path);
		return EXIT_USAGE;
	}
	job.dst_fd = open(job.dst_path, O_WRONLY | O_CLOEXEC | (resume ? 0 : O_CREAT),
			  sst.st_mode & 0777);
	if (job.dst_fd < 0 || fstat(job.dst_fd, &dst_st) < 0) {
		err("%s: %s", job.dst_path, strerror(errno));
		return EXIT_FAIL;
	}
	if (dst_st.st_dev == sst.st_dev && dst_st.st_ino == sst.st_ino && !have_range &&
	    !have_doff) {
		err("%s and %s are the same file", job.src_path, job.dst_path);
		return EXIT_USAGE;
	}
	job.src_dev = sst.st_dev;
	job.src_ino = sst.st_ino;
	job.block = fstatfs(job.dst_fd, &sfs) == 0 && sfs.f_bsize > 0 ? sfs.f_bsize : 4096;
	src_size = sst.st_size;

	if (resume) {
		rc = load_progress(&job);
		if (rc)
			return rc;
	} else {
		if (!job.length) {
			if (job.src_offset > src_size) {
				err("%s: --offset %" PRIu64 " is past its end (%" PRIu64 ")",
				    job.src_path, job.src_offset, src_size);
				return EXIT_USAGE;
			}
			job.length = src_size - job.src_offset;
		}
		if (job.src_offset > src_size || job.length > src_size - job.src_offset) {
			err("%s: the range %" PRIu64 "+%" PRIu64 " is past its end (%" PRIu64 ")",
			    job.src_path, job.src_offset, job.length, src_size);
			return EXIT_USAGE;
		}
		/* A whole-file clone replaces DST, as cp --reflink does. */
		if (!have_range && !have_doff && ftruncate(job.dst_fd, 0) < 0) {
			err("%s: %s", job.dst_path, strerror(errno));
			return EXIT_FAIL;
		}
	}
	if (job.length == 0) {
		fremovexattr(job.dst_fd, RESUME_XATTR);
		return EXIT_OK;
	}

	/*
	 * Write SRC's dirty data back now, while nothing is locked: a clone
	 * flushes it anyway, but under the locks that readers wait for. Not
	 * fdatasync(): on btrfs it holds SRC's i_rwsem while it logs every
	 * extent of the file, which stalled SRC's writers and direct readers
	 * for seconds on a file of 100,000 extents.
	 */
	sync_file_range(job.src_fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE |
			SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
	catch_signals();
	job.progress = !quiet && isatty(STDERR_FILENO);
	record_progress(&job, true);
	t0 = now();
	if (!strcmp(method, "ficlone") || job.budget_ms == 0) {
		ret = clone_ficlone(&job);
	} else {
		ret = 1;
		if (strcmp(method, "ficlonerange"))
			ret = clone_ficlonerange2(&job);
		if (ret == 1 && !strcmp(method, "ficlonerange2")) {
			err("this kernel has no FICLONERANGE2 (it needs the pcshare series)");
			return EXIT_NOTSUP;
		}
		if (ret == 1)
			ret = clone_ficlonerange(&job);
	}
	if (ret)
		return clone_failed(&job, ret);
	show_progress(&job, true);
	fremovexattr(job.dst_fd, RESUME_XATTR);
	if (json)
		printf("{\"src\": \"%s\", \"dst\": \"%s\", \"method\": \"%s\", \"bytes\": %" PRIu64
		       ", \"seconds\": %.6f, \"calls\": %lu, \"longest_call_ms\": %.3f}\n",
		       job.src_path, job.dst_path, job.method, job.length, now() - t0,
		       job.calls, job.longest_call * 1000);
	return EXIT_OK;
}

static int read_counter(const char *dir, const char *name, uint64_t *v)
{
	char path[PATH_MAX];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	ok = fscanf(f, "%" SCNu64, v) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

/* Is shared_cache among this mount's options? */
static bool cache_enabled(const char *mountpoint)
{
	char real[PATH_MAX], line[4096], mnt[PATH_MAX], fstype[64], optsbuf[2048];
	bool on = false;
	FILE *f;

	if (!realpath(mountpoint, real))
		return false;
	f = fopen("/proc/self/mounts", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *o, *save;

		if (sscanf(line, "%*s %4095s %63s %2047s", mnt, fstype, optsbuf) != 3)
			continue;
		if (strcmp(mnt, real) || strcmp(fstype, "btrfs"))
			continue;
		on = false;	/* the last mount on this path is the visible one */
		for (o = strtok_r(optsbuf, ",", &save); o; o = strtok_r(NULL, ",", &save))
			if (!strcmp(o, "shared_cache"))
				on = true;
	}
	fclose(f);
	return on;
}

static int cmd_stat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const char *names[] = { "resident_pages", "hits", "misses", "bytes_filled",
				       "bytes_served", "invalidations" };
	struct btrfs_ioctl_fs_info_args info = { 0 };
	uint64_t v[6], saved;
	char dir[128], uuid[37], h1[32], h2[32], h3[32], h4[32];
	const char *mnt;
	char *p;
	struct statfs sfs;
	bool json = false, on;
	double ratio;
	int c, fd, i;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	mnt = argv[optind];
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstatfs(fd, &sfs) < 0) {
		err("%s: %s", mnt, strerror(errno));
		return EXIT_FAIL;
	}
	if (sfs.f_type != BTRFS_SUPER_MAGIC) {
		err("%s: not a btrfs filesystem; the shared extent cache is a btrfs feature", mnt);
		return EXIT_NOTSUP;
	}
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &info) < 0) {
		err("%s: BTRFS_IOC_FS_INFO: %s", mnt, strerror(errno));
		return EXIT_FAIL;
	}
	for (i = 0, p = uuid; i < 16; i++) {
		p += sprintf(p, "%02x", info.fsid[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			*p++ = '-';
	}
	snprintf(dir, sizeof(dir), "/sys/fs/btrfs/%s/shared_cache", uuid);
	for (i = 0; i < 6; i++) {
		if (read_counter(dir, names[i], &v[i])) {
			err("%s: this kernel has no btrfs shared extent cache (%s is missing); "
			    "it needs the pcshare series with CONFIG_BTRFS_SHARED_CACHE", mnt, dir);
			return EXIT_NOTSUP;
		}
	}
	on = cache_enabled(mnt);
	ratio = v[1] + v[2] ? (double)v[1] / (v[1] + v[2]) : 0.0;
	saved = v[4] > v[3] ? v[4] - v[3] : 0;
	if (json) {
		printf("{\"mountpoint\": \"%s\", \"fsid\": \"%s\", \"enabled\": %s, "
		       "\"resident_pages\": %" PRIu64 ", \"resident_bytes\": %" PRIu64
		       ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"hit_ratio\": %.6f"
		       ", \"bytes_filled\": %" PRIu64 ", \"bytes_served\": %" PRIu64
		       ", \"bytes_saved\": %" PRIu64 ", \"invalidations\": %" PRIu64 "}\n",
		       mnt, uuid, on ? "true" : "false", v[0], v[0] * (uint64_t)getpagesize(),
		       v[1], v[2], ratio, v[3], v[4], saved, v[5]);
		return EXIT_OK;
	}
	printf("%s (btrfs %s): shared extent cache %s\n", mnt, uuid,
	       on ? "on" : "off (mount -o remount,shared_cache turns it on)");
	printf("  resident       %s (%" PRIu64 " pages)\n",
	       human(v[0] * (uint64_t)getpagesize(), h1, sizeof(h1)), v[0]);
	printf("  hits / misses  %" PRIu64 " / %" PRIu64 " (%.1f%% hits)\n", v[1], v[2],
	       ratio * 100);
	printf("  served         %s, of which %s filled from disk\n",
	       human(v[4], h2, sizeof(h2)), human(v[3], h3, sizeof(h3)));
	printf("  saved          %s of disk reads and page cache copies\n",
	       human(saved, h4, sizeof(h4)));
	printf("  invalidations  %" PRIu64 "\n", v[5]);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return EXIT_OK;
	}
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("pcshare %s\n", PCSHARE_VERSION);
		return EXIT_OK;
	}
	if (argc >= 2 && !strcmp(argv[1], "clone"))
		return cmd_clone(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "stat"))
		return cmd_stat(argc - 1, argv + 1);
	usage(stderr);
	return EXIT_USAGE;
}
