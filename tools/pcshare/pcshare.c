// SPDX-License-Identifier: GPL-2.0
/*
 * pcshare: clone files without stalling their readers, and show the btrfs
 * shared extent cache's counters. See pcshare(1).
 */
#define _GNU_SOURCE
#include <ctype.h>
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
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <linux/btrfs.h>
#include <linux/magic.h>

#include "ficlonerange2.h"

#ifndef PCSHARE_VERSION
#define PCSHARE_VERSION "unknown"
#endif

#ifndef FS_IOC_GETFSUUID	/* Linux 6.5; older headers lack it */
struct fsuuid2 {
	__u8 len;
	__u8 uuid[16];
};
#define FS_IOC_GETFSUUID _IOR(0x15, 0, struct fsuuid2)
#endif

/* Exit codes, documented in pcshare(1) and usage(). */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,		/* I/O error, missing file, anything else */
	EXIT_USAGE = 2,		/* bad arguments, invalid range, not a regular file */
	EXIT_NOTSUP = 3,	/* no reflink here: other filesystems, no support, no cache */
	EXIT_NOSPACE = 4,	/* ENOSPC or EDQUOT part way; --resume continues */
	EXIT_BUSY = 5,		/* another pcshare clone is writing DST */
	/* 128 + N: interrupted by signal N; --resume continues */
};

#define RESUME_XATTR "user.pcshare.clone"
#define RECORD_VERSION 3
#define DEFAULT_BUDGET_MS 100
#define MIB (1024ULL * 1024)

static const char *prog = "pcshare";
static volatile sig_atomic_t stop_signal;
static char error_msg[3 * PATH_MAX];	/* the first error, for --json */
static bool json;			/* --json, wherever it is */

static void usage(FILE *f)
{
	fprintf(f,
"usage: pcshare clone SRC DST [--offset N] [--length N] [--dest-offset N]\n"
"                     [--budget-ms MS] [--chunk N] [--method M] [--resume]\n"
"                     [-q|--quiet] [--json]\n"
"       pcshare stat PATH [--json]\n"
"       pcshare -h|--help | -V|--version [--json]\n"
"\n"
"clone  reflink SRC (or a range of it) into DST in short steps, so that\n"
"       readers and writers of both files never wait long. Uses FICLONERANGE2\n"
"       where the kernel has it, else a FICLONERANGE loop whose chunk adapts\n"
"       to the budget. A DST that is a directory means DST/basename(SRC).\n"
"       Sizes are digits with an optional K, M, G or T suffix, in either case\n"
"       and optionally followed by iB (4k, 4K, 4KiB), powers of 1024.\n"
"  --offset N       start in SRC (default 0)\n"
"  --length N       bytes to clone (default or 0: to SRC's end)\n"
"  --dest-offset N  start in DST (default: same as --offset)\n"
"  --budget-ms MS   longest time one kernel call may hold the files (default %d;\n"
"                   0: clone in one call, like cp --reflink)\n"
"  --chunk N        fixed chunk size, a multiple of the block size (0: adaptive)\n"
"  --method M       auto (default), ficlonerange2, ficlonerange or ficlone (one\n"
"                   call, as --budget-ms 0: neither takes --chunk)\n"
"  --resume         continue the interrupted clone recorded on DST\n"
"  -q, --quiet      no progress bar\n"
"  --json           print one JSON object on stdout, also on errors (may also\n"
"                   come before the command)\n"
"\n"
"stat   the shared extent cache counters of the btrfs mount PATH is on, and\n"
"       (mount option shared_cache_map) the shared copies of mapped files of\n"
"       read-only subvolumes: pages, copies, mappings bound, bytes read\n"
"\n"
"exit: 0 done, 1 failed, 2 usage, invalid range or not a regular file,\n"
"3 reflink or cache not available there, 4 out of space (DST can be resumed),\n"
"5 another pcshare clone is writing DST, 128+N killed by signal N (130 SIGINT,\n"
"143 SIGTERM; DST can be resumed). A refused clone leaves DST as it was.\n",
		DEFAULT_BUDGET_MS);
}

static void verr(const char *fmt, va_list ap)
{
	char msg[sizeof(error_msg)];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "%s: %s\n", prog, msg);
	if (!error_msg[0])
		snprintf(error_msg, sizeof(error_msg), "%s", msg);
}

static void err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(fmt, ap);
	va_end(ap);
}

/* One line on what is wrong, one on where to look: not the whole help. */
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(fmt, ap);
	va_end(ap);
	fprintf(stderr, "try '%s --help'\n", prog);
	return EXIT_USAGE;
}

/* getopt's own messages would miss --json's "error"; say it ourselves. */
static int bad_option(char **argv, int c)
{
	if (c == ':')
		return usage_error("option '%s' needs a value", argv[optind - 1]);
	if (optopt)
		return usage_error("unknown option '-%c'", optopt);
	return usage_error("unknown option '%s'", argv[optind - 1]);
}

static bool wants_json(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--json"))
			return true;
	return false;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Digits and, if suffix, one of K M G T in either case (as dd and
 * truncate take them), optionally followed by "iB":
 * strtoull() alone would take " -1" and "+4096" too.
 */
static int parse_size(const char *s, uint64_t *out, bool suffix)
{
	static const char units[] = "KMGT";
	const char *u;
	unsigned long long v;
	char *end;
	int shift = 0;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	u = suffix && *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
	if (u) {
		shift = 10 * (u - units + 1);
		end++;
		if (!strcmp(end, "iB"))
			end += 2;
	}
	if (*end || v > UINT64_MAX >> shift)
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

/* Length of the UTF-8 sequence at p, 0 if it is none: JSON must be UTF-8. */
static int utf8_len(const unsigned char *p)
{
	int n, i;

	if (*p < 0x80)
		return 1;
	if (*p >= 0xc2 && *p <= 0xdf)
		n = 2;
	else if (*p >= 0xe0 && *p <= 0xef)
		n = 3;
	else if (*p >= 0xf0 && *p <= 0xf4)
		n = 4;
	else
		return 0;
	for (i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* Overlong forms, surrogates, beyond U+10FFFF. */
	if ((*p == 0xe0 && p[1] < 0xa0) || (*p == 0xed && p[1] > 0x9f) ||
	    (*p == 0xf0 && p[1] < 0x90) || (*p == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

/* A file name as a JSON string; bytes that are not UTF-8 become U+FFFD. */
static void json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int n;

	if (!s) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (; *p; p += n) {
		n = utf8_len(p);
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else if (!n)
			fputs("\\ufffd", stdout);
		else
			fwrite(p, 1, n, stdout);
		if (!n)
			n = 1;
	}
	putchar('"');
}

/* Every JSON object starts alike, so a script can always read these. */
static void json_begin(int rc)
{
	fputs("{\"version\": ", stdout);
	json_str(PCSHARE_VERSION);
	printf(", \"exit_status\": %d, \"error\": ", rc);
	json_str(rc ? error_msg : NULL);
}

static void json_end(int rc)
{
	json_begin(rc);
	puts("}");
}

static void json_field(const char *key, const char *val)
{
	printf(", \"%s\": ", key);
	json_str(val);
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
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

struct clone_job {
	const char *src_path;
	char dst_path[PATH_MAX];	/* DST, or DST/basename(SRC) */
	int src_fd, dst_fd;
	struct stat src_st, dst_st;
	char src_file[96];	/* filesystem, inode, generation: which file */
	char src_state[64];	/* size and ctime: has it changed since */
	uint64_t src_offset, length, dest_offset;
	uint64_t done;		/* of the range, also by earlier runs */
	uint64_t done_before;	/* what --resume started from */
	uint64_t tail;		/* cloned first, see clone_tail_first() */
	uint64_t chunk;		/* fixed chunk, 0 = adaptive */
	uint64_t budget_ms;
	uint64_t block;		/* alignment of offsets and chunks */
	const char *method;	/* what actually ran */
	unsigned long calls;
	double longest_call;	/* seconds */
	double start, last_shown;
	bool resume, same_file, created, started, progress;
};

/* Size and a timestamp: enough to tell that a file changed since. */
static void file_state(char *buf, size_t len, const struct stat *st, const struct timespec *t)
{
	snprintf(buf, len, "%jd@%jd.%09ld", (intmax_t)st->st_size, (intmax_t)t->tv_sec,
		 t->tv_nsec);
}

/*
 * Name SRC in a way that survives a remount or reboot, unlike st_dev. XFS's
 * f_fsid is its device number, so ask for the UUID; btrfs's f_fsid is its
 * UUID mixed with the subvolume id, which its inode numbers need, as they
 * repeat across subvolumes. The generation tells a reused inode number.
 */
static void identify_src(struct clone_job *job)
{
	struct fsuuid2 u = { 0 };
	struct statfs sfs = { 0 };
	unsigned int gen = 0;
	char fsid[2 * sizeof(u.uuid) + 1];
	int i;

	fstatfs(job->src_fd, &sfs);
	if (sfs.f_type != BTRFS_SUPER_MAGIC &&
	    ioctl(job->src_fd, FS_IOC_GETFSUUID, &u) == 0 && u.len &&
	    u.len <= sizeof(u.uuid)) {
		for (i = 0; i < u.len; i++)
			sprintf(fsid + 2 * i, "%02x", u.uuid[i]);
	} else {
		snprintf(fsid, sizeof(fsid), "%08x%08x", (unsigned int)sfs.f_fsid.__val[0],
			 (unsigned int)sfs.f_fsid.__val[1]);
	}
	ioctl(job->src_fd, FS_IOC_GETVERSION, &gen);
	snprintf(job->src_file, sizeof(job->src_file), "%s:%ju:%u", fsid,
		 (uintmax_t)job->src_st.st_ino, gen);
	file_state(job->src_state, sizeof(job->src_state), &job->src_st, &job->src_st.st_ctim);
}

/*
 * The record also pins DST's size and mtime as they are after the chunks
 * it counts: a clone changes both (and the record, an xattr, only ctime),
 * so anything else that writes or truncates DST since makes --resume
 * refuse rather than trust bytes that are no longer there. Hence a record
 * after every call: one that lagged would no longer match DST.
 */
static void record_progress(struct clone_job *job)
{
	char val[256], dst_state[64];
	struct stat st;

	/* One file: the record would sit on SRC, and rerunning is as good. */
	if (job->same_file || fstat(job->dst_fd, &st) < 0)
		return;
	file_state(dst_state, sizeof(dst_state), &st, &st.st_mtim);
	snprintf(val, sizeof(val), "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s %s %s",
		 RECORD_VERSION, job->src_offset, job->length, job->dest_offset, job->done,
		 job->src_file, job->src_state, dst_state);
	/* Best effort: without xattrs only --resume is lost, not the clone. */
	fsetxattr(job->dst_fd, RESUME_XATTR, val, strlen(val), 0);
}

static int load_progress(struct clone_job *job)
{
	char val[256], file[sizeof(job->src_file)], state[sizeof(job->src_state)];
	char dst_state[64], now_state[64];
	uint64_t off, len, doff, done;
	struct stat st;
	int ver, end = 0;
	ssize_t n;

	n = fgetxattr(job->dst_fd, RESUME_XATTR, val, sizeof(val) - 1);
	if (n < 0) {
		err("%s: no interrupted clone to resume (%s)", job->dst_path,
		    errno == ENODATA ? "nothing recorded" : strerror(errno));
		return EXIT_FAIL;
	}
	val[n] = 0;
	if (sscanf(val, "%d %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %95s %63s %63s%n",
		   &ver, &off, &len, &doff, &done, file, state, dst_state, &end) != 8 || val[end] ||
	    ver != RECORD_VERSION || done > len) {
		err("%s: unreadable resume record '%s' (from another pcshare version?); "
		    "clone again without --resume", job->dst_path, val);
		return EXIT_FAIL;
	}
	if (strcmp(file, job->src_file)) {
		err("%s: the interrupted clone came from another file than %s",
		    job->dst_path, job->src_path);
		return EXIT_USAGE;
	}
	if (strcmp(state, job->src_state)) {
		err("%s: %s changed since the clone was interrupted (size or ctime); "
		    "clone again without --resume", job->dst_path, job->src_path);
		return EXIT_USAGE;
	}
	if (fstat(job->dst_fd, &st) < 0) {
		err("%s: %s", job->dst_path, strerror(errno));
		return EXIT_FAIL;
	}
	file_state(now_state, sizeof(now_state), &st, &st.st_mtim);
	if (strcmp(dst_state, now_state)) {
		err("%s: changed since the clone was interrupted (size or mtime), so the record "
		    "no longer says what is in it; clone again without --resume", job->dst_path);
		return EXIT_USAGE;
	}
	job->src_offset = off;
	job->length = len;
	job->dest_offset = doff;
	job->done = done;
	return EXIT_OK;
}

static void format_eta(char *buf, size_t len, double rate, uint64_t left)
{
	unsigned long s;

	if (rate <= 0) {
		snprintf(buf, len, " ETA --:--");
		return;
	}
	s = left / rate;
	if (s >= 3600)
		snprintf(buf, len, " ETA %lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, " ETA %lu:%02lu", s / 60, s % 60);
}

/*
 * One line, redrawn in place and cleared to its end, so that a shorter
 * line leaves nothing behind. It stays a column short of the terminal's
 * width, read each time as the window may change, so that it never wraps:
 * the bar's width depends on that alone, so it does not jump as the
 * numbers change, and the numbers that do not fit are left out, least
 * useful first.
 */
static void show_progress(struct clone_job *job, bool final)
{
	static const char hashes[] = "########################################";
	char field[4][48], a[32], b[32], r[32];
	double t = now(), frac, rate;
	struct winsize ws;
	int cols = 80, bar, used = 0, i, n;

	if (!job->progress || (!final && t - job->last_shown < 0.1))
		return;
	job->last_shown = t;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col)
		cols = ws.ws_col;
	frac = job->length ? (double)job->done / job->length : 1.0;
	rate = t > job->start ? (job->done - job->done_before) / (t - job->start) : 0;
	snprintf(field[0], sizeof(field[0]), "%5.1f%%", frac * 100);
	snprintf(field[1], sizeof(field[1]), " %s / %s", human(job->done, a, sizeof(a)),
		 human(job->length, b, sizeof(b)));
	snprintf(field[2], sizeof(field[2]), " %s/s", human(rate, r, sizeof(r)));
	format_eta(field[3], sizeof(field[3]), rate, job->length - job->done);

	/* 56: the widest the fields get, "100.0% 1023.9 GiB / ... ETA 99:59:59". */
	bar = cols - 1 - 3 - 56;
	if (bar > (int)sizeof(hashes) - 1)
		bar = sizeof(hashes) - 1;
	fputc('\r', stderr);
	if (bar >= 10) {
		n = frac * bar;
		used = fprintf(stderr, "[%.*s%*s] ", n, hashes, bar - n, "");
	}
	for (i = 0; i < 4 && used + (int)strlen(field[i]) < cols; i++)
		used += fprintf(stderr, "%s", field[i]);
	fprintf(stderr, "\033[K%s", final ? "\n" : "");
	fflush(stderr);
}

/* Turn a clone errno into a message that names the files and an exit code. */
static int clone_failed(struct clone_job *job, int e)
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

/*
 * A clone of nothing, from SRC's EOF: the kernel checks the two files as
 * for any clone (one mount, reflink support, read-only, immutable, btrfs
 * checksums alike) and then changes nothing. So DST is left alone when
 * the clone could never work.
 */
static int probe_clone(struct clone_job *job)
{
	struct file_clone_range r = {
		.src_fd = job->src_fd,
		.src_offset = job->src_st.st_size,
	};

	return ioctl(job->dst_fd, FICLONERANGE, &r) < 0 ? errno : 0;
}

/* Invalid flags: the pcshare kernel checks them first and says EINVAL. */
static bool have_ficlonerange2(struct clone_job *job)
{
	struct file_clone_range2 args = { .src_fd = job->src_fd, .flags = 1ULL << 63 };

	return ioctl(job->dst_fd, FICLONERANGE2, &args) < 0 && errno == EINVAL;
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

/*
 * FICLONERANGE's rules (generic_remap_checks(), generic_remap_check_len())
 * for the whole range. Each chunk passes them on its own, so a range that
 * breaks them only as a whole would be cloned in part before a chunk is
 * refused, or, overlapping in one file, cloned from data that its first
 * chunks already overwrote.
 */
static const char *range_problem(const struct clone_job *job, uint64_t dst_size)
{
	uint64_t bs = job->block, len = job->length, src_size = job->src_st.st_size;
	uint64_t blen = (len + bs - 1) / bs * bs;
	struct rlimit rl;

	if (job->src_offset % bs || job->dest_offset % bs)
		return "offsets must be multiples of the block size";
	if (job->src_offset > src_size || len > src_size - job->src_offset)
		return "it runs past its end";
	if (job->dest_offset > INT64_MAX - len)
		return "DST would end past the largest file offset";
	if (len % bs && job->src_offset + len != src_size)
		return "the length must be a multiple of the block size unless it ends at SRC's end";
	if (len % bs && job->dest_offset + len < dst_size)
		return "SRC's partial last block would land inside DST, not at or past its end";
	if (job->same_file && job->dest_offset + blen > job->src_offset &&
	    job->dest_offset < job->src_offset + blen)
		return "the two ranges overlap within one file";
	if (!getrlimit(RLIMIT_FSIZE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    job->dest_offset + len > rl.rlim_cur)
		return "DST would grow past the file size limit (ulimit -f)";
	return NULL;
}

/* What was opened may not be what was checked before: the name may have changed. */
static int opened_regular(int fd, const char *path, struct stat *st)
{
	if (fd < 0 || fstat(fd, st) < 0) {
		err("%s: %s", path, strerror(errno));
		return EXIT_FAIL;
	}
	if (!S_ISREG(st->st_mode)) {
		err("%s: not a regular file", path);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/*
 * Open DST, creating it if it is missing, and lock it; stat before open, as
 * a FIFO's open would block. Two clones may create one DST at once: the one
 * that loses O_EXCL opens what the other created, and the lock says which
 * of them clones. A lock won on a file that was removed or replaced in the
 * meantime (by a refused run that had created it) is on the wrong file, so
 * start over.
 */
static int open_dst(struct clone_job *job)
{
	const char *slash = strrchr(job->dst_path, '/');
	int flags = O_WRONLY | O_NONBLOCK | O_CLOEXEC;
	char link[PATH_MAX];
	struct stat st;
	ssize_t n;
	int rc;

	for (;;) {
		/*
		 * The stat's errno decides, not readlink's: readlink says EINVAL
		 * when another clone created DST since the stat, and then O_EXCL
		 * below fails and the loop finds the other's file and lock.
		 */
		int e = stat(job->dst_path, &st) < 0 ? errno : 0;

		job->created = false;
		if (!e) {
			if (!S_ISREG(st.st_mode)) {
				err("%s: not a regular file", job->dst_path);
				return EXIT_USAGE;
			}
			job->dst_fd = open(job->dst_path, flags);
			if (job->dst_fd < 0 && errno == ENOENT)
				continue;	/* removed since the stat */
		} else if (e == ENOENT && (n = readlink(job->dst_path, link, sizeof(link) - 1)) >= 0) {
			/* As cp: creating through it puts a file wherever it points. */
			err("%s: a symbolic link to '%.*s', which does not exist; not writing through it",
			    job->dst_path, (int)n, link);
			return EXIT_FAIL;
		} else if (e == ENOENT && !job->resume) {
			job->dst_fd = open(job->dst_path, flags | O_CREAT | O_EXCL,
					   job->src_st.st_mode & 0777);
			if (job->dst_fd < 0 && errno == EEXIST)
				continue;	/* created since the stat */
			if (job->dst_fd < 0 && errno == ENOENT && slash) {
				err("%s: directory %.*s does not exist", job->dst_path,
				    (int)(slash - job->dst_path), job->dst_path);
				return EXIT_FAIL;
			}
			job->created = job->dst_fd >= 0;
		} else {
			job->dst_fd = -1;
			errno = e;	/* what opened_regular() reports */
		}
		rc = opened_regular(job->dst_fd, job->dst_path, &job->dst_st);
		if (rc)
			return rc;
		/* Two clones into one DST would each record the other's progress. */
		if (flock(job->dst_fd, LOCK_EX | LOCK_NB) < 0) {
			job->created = false;	/* the lock's holder may be using it */
			if (errno == EWOULDBLOCK) {
				err("%s: another pcshare clone is writing it", job->dst_path);
				return EXIT_BUSY;
			}
			err("%s: flock: %s", job->dst_path, strerror(errno));
			return EXIT_FAIL;
		}
		if (stat(job->dst_path, &st) == 0 && st.st_dev == job->dst_st.st_dev &&
		    st.st_ino == job->dst_st.st_ino)
			return EXIT_OK;
		close(job->dst_fd);
	}
}

/*
 * Remove the DST this run created, only while it is surely still that:
 * locked by this run, still at its name and still empty.
 */
static void remove_created_dst(struct clone_job *job)
{
	struct stat st, mine;

	if (job->created && fstat(job->dst_fd, &mine) == 0 && mine.st_size == 0 &&
	    stat(job->dst_path, &st) == 0 && st.st_dev == mine.st_dev && st.st_ino == mine.st_ino)
		unlink(job->dst_path);
}

/* SRC, then DST resolved as cp does (a directory means DST/basename(SRC)). */
static int open_files(struct clone_job *job, const char *dst)
{
	size_t n = strlen(dst);
	struct stat st;
	int rc;

	if (stat(job->src_path, &st) < 0) {
		err("%s: %s", job->src_path, strerror(errno));
		return EXIT_FAIL;
	}
	if (!S_ISREG(st.st_mode)) {
		err("%s: not a regular file", job->src_path);
		return EXIT_USAGE;
	}
	/* O_NONBLOCK in case a FIFO took its place since. */
	job->src_fd = open(job->src_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	rc = opened_regular(job->src_fd, job->src_path, &job->src_st);
	if (rc)
		return rc;

	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		n = snprintf(job->dst_path, sizeof(job->dst_path), "%s%s%s", dst,
			     dst[n - 1] == '/' ? "" : "/", basename(job->src_path));
	} else if (n && dst[n - 1] == '/') {
		err("%s: %s", dst, errno == ENOENT ? "no such directory" : strerror(errno));
		return EXIT_FAIL;
	} else {
		n = snprintf(job->dst_path, sizeof(job->dst_path), "%s", dst);
	}
	if (n >= sizeof(job->dst_path)) {
		err("%s: %s", dst, strerror(ENAMETOOLONG));
		return EXIT_FAIL;
	}
	rc = open_dst(job);
	if (rc)
		return rc;
	job->same_file = job->dst_st.st_dev == job->src_st.st_dev &&
			 job->dst_st.st_ino == job->src_st.st_ino;
	return EXIT_OK;
}

/* Everything that can refuse the clone, before DST is changed in any way. */
static int plan_clone(struct clone_job *job, const char *dst, const char *method,
		      bool whole, bool *use2)
{
	const char *problem;
	struct statfs sfs;
	struct stat st;
	int rc, e;

	rc = open_files(job, dst);
	if (rc)
		return rc;
	if (job->same_file && (whole || job->resume)) {
		err("%s and %s are the same file%s", job->src_path, job->dst_path,
		    job->resume ? ": clones within one file keep no record to resume" : "");
		return EXIT_USAGE;
	}
	identify_src(job);
	job->block = fstatfs(job->dst_fd, &sfs) == 0 && sfs.f_bsize > 0 ? sfs.f_bsize : 4096;
	if (job->resume) {
		rc = load_progress(job);
		if (rc)
			return rc;
	} else if (!job->length) {
		job->length = job->src_offset < (uint64_t)job->src_st.st_size ?
			      job->src_st.st_size - job->src_offset : 0;
	}
	if (fstat(job->dst_fd, &st) < 0) {
		err("%s: %s", job->dst_path, strerror(errno));
		return EXIT_FAIL;
	}
	if (job->src_offset > (uint64_t)job->src_st.st_size) {
		err("offset %" PRIu64 " is past the end of %s (size %jd)", job->src_offset,
		    job->src_path, (intmax_t)job->src_st.st_size);
		return EXIT_USAGE;
	}
	/* A whole-file clone replaces DST, as cp --reflink does. */
	problem = range_problem(job, whole ? 0 : st.st_size);
	if (problem) {
		err("%s -> %s: invalid range (%" PRIu64 " bytes from %" PRIu64 " to %" PRIu64
		    ", block size %" PRIu64 ", %s %jd bytes): %s", job->src_path, job->dst_path,
		    job->length, job->src_offset, job->dest_offset, job->block, job->src_path,
		    (intmax_t)job->src_st.st_size, problem);
		return EXIT_USAGE;
	}
	if (job->chunk % job->block) {
		err("--chunk %" PRIu64 " is not a multiple of %s's block size (%" PRIu64 ")",
		    job->chunk, job->dst_path, job->block);
		return EXIT_USAGE;
	}
	/*
	 * Write SRC's dirty data back now, while nothing is locked: a clone
	 * flushes it anyway, but under the locks that readers wait for. Not
	 * fdatasync(): on btrfs it holds SRC's i_rwsem while it logs every
	 * extent of the file, which stalled SRC's writers and direct readers
	 * for seconds on a file of 100,000 extents.
	 */
	sync_file_range(job->src_fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE |
			SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
	e = probe_clone(job);
	if (e)
		return clone_failed(job, e);
	*use2 = (!strcmp(method, "auto") || !strcmp(method, "ficlonerange2")) &&
		have_ficlonerange2(job);
	if (!*use2 && !strcmp(method, "ficlonerange2")) {
		err("this kernel has no FICLONERANGE2 (it needs the pcshare series)");
		return EXIT_NOTSUP;
	}
	return EXIT_OK;
}

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
	int c, li, ret, rc;

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

static int cmd_clone(int argc, char **argv)
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

/* 0, or why not: an errno from open, EINVAL for what is not one number. */
static int read_counter(const char *path, char *text, size_t len, uint64_t *v)
{
	FILE *f = fopen(path, "r");
	bool got;

	if (!f)
		return errno;
	got = fgets(text, len, f) != NULL;
	fclose(f);
	if (!got)
		*text = 0;
	text[strcspn(text, "\n")] = 0;
	return parse_size(text, v, false) ? EINVAL : 0;
}

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++, d++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d = (s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0');
			s += 3;
		} else {
			*d = *s;
		}
	}
	*d = 0;
}

static bool has_option(const char *opts, const char *name)
{
	size_t n = strlen(name);
	const char *o;

	for (o = opts; o; o = strchr(o, ',') ? strchr(o, ',') + 1 : NULL)
		if (!strncmp(o, name, n) && (o[n] == ',' || !o[n]))
			return true;
	return false;
}

#define MAPPINGS_SHARED	2	/* cache_enabled(): shared_cache_map too */

/*
 * Is shared_cache among the options of the mount fd is on? Found by mount
 * id, so a subdirectory, a bind mount, a mount point with a space in its
 * name and one mount on top of another all find the mount that is seen.
 * 1 on (| MAPPINGS_SHARED), 0 off, -1 unknown; mnt gets the mount point.
 */

static int cache_enabled(int fd, char *mnt, size_t len)
{
	const char *path = getenv("PCSHARE_MOUNTINFO") ?: "/proc/self/mountinfo";
	char *line = NULL, *field[6], *tok = NULL, *save;
	struct statx stx;
	size_t cap = 0;
	int on = -1, i;
	FILE *f;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID))
		return -1;
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (on < 0 && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		for (i = 0; i < 6 && (tok = strtok_r(i ? NULL : line, " ", &save)); i++)
			field[i] = tok;
		if (i < 6 || strtoull(field[0], NULL, 10) != stx.stx_mnt_id)
			continue;
		/* Optional fields, then "-", the type, the source, the fs's options. */
		while ((tok = strtok_r(NULL, " ", &save)) && strcmp(tok, "-"))
			;
		for (i = 0; i < 3 && tok; i++)
			tok = strtok_r(NULL, " ", &save);
		unescape(field[4]);
		snprintf(mnt, len, "%s", field[4]);
		on = has_option(field[5], "shared_cache") || (tok && has_option(tok, "shared_cache"));
		if (on && tok && has_option(tok, "shared_cache_map"))
			on |= MAPPINGS_SHARED;
	}
	free(line);
	fclose(f);
	return on;
}

static int run_stat(int argc, char **argv, const char **path)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const char *names[] = { "resident_pages", "hits", "misses", "bytes_filled",
				       "bytes_served", "invalidations",
				       /* Since btrfs/0020; absent from older kernels. */
				       "mapped_aliases", "mapped_pages", "mapped_attaches",
				       "mapped_bytes_read" };
	const char *sysfs = getenv("PCSHARE_SYSFS") ?: "/sys/fs/btrfs";
	struct btrfs_ioctl_fs_info_args info = { 0 };
	uint64_t v[10], saved, lookups;
	bool mapped = true;
	char dir[PATH_MAX], file[PATH_MAX + NAME_MAX], text[32], mnt[PATH_MAX] = "";
	char uuid[37], h1[32], h2[32], h3[32], h4[32];
	struct statfs sfs;
	struct stat st;
	int c, fd, i, on, e;
	char *p;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': break;
		case 'h': usage(stdout); return -1;
		default: return bad_option(argv, c);
		}
	}
	if (argc - optind > 1)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (argc - optind < 1)
		return usage_error("stat needs one PATH");
	*path = argv[optind];
	/* Any file will do to find its filesystem; others could block or act on open. */
	if (stat(*path, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		err("%s: neither a directory nor a regular file", *path);
		return EXIT_USAGE;
	}
	fd = open(*path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstatfs(fd, &sfs) < 0) {
		err("%s: %s", *path, strerror(errno));
		return EXIT_FAIL;
	}
	if (sfs.f_type != BTRFS_SUPER_MAGIC) {
		err("%s: not a btrfs filesystem; the shared extent cache is a btrfs feature", *path);
		return EXIT_NOTSUP;
	}
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &info) < 0) {
		err("%s: BTRFS_IOC_FS_INFO: %s", *path, strerror(errno));
		return EXIT_FAIL;
	}
	for (i = 0, p = uuid; i < 16; i++) {
		p += sprintf(p, "%02x", info.fsid[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			*p++ = '-';
	}
	snprintf(dir, sizeof(dir), "%s/%s/shared_cache", sysfs, uuid);
	for (i = 0; i < 10; i++) {
		snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
		e = read_counter(file, text, sizeof(text), &v[i]);
		if (e == ENOENT && i >= 6) {
			mapped = false;
			continue;
		}
		if (e == ENOENT) {
			err("%s: this kernel has no btrfs shared extent cache (%s is missing); "
			    "it needs the pcshare series with CONFIG_BTRFS_SHARED_CACHE", *path, file);
			return EXIT_NOTSUP;
		}
		/* Root only: they would tell one tenant what another reads. */
		if (e == EACCES)
			err("%s: the shared cache counters in %s are readable by root only", *path, dir);
		else if (e == EINVAL)
			err("%s: the shared cache counter %s is garbled: '%s'", *path, file, text);
		else if (e)
			err("%s: %s: %s", *path, file, strerror(e));
		if (e)
			return EXIT_FAIL;
	}
	on = cache_enabled(fd, mnt, sizeof(mnt));
	lookups = v[1] + v[2];
	saved = v[4] > v[3] ? v[4] - v[3] : 0;
	if (json) {
		json_begin(EXIT_OK);
		json_field("path", *path);
		json_field("mountpoint", mnt[0] ? mnt : NULL);
		json_field("fsid", uuid);
		printf(", \"enabled\": %s, \"resident_pages\": %" PRIu64 ", \"resident_bytes\": %"
		       PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"hit_ratio\": ",
		       on < 0 ? "null" : on ? "true" : "false", v[0],
		       v[0] * (uint64_t)getpagesize(), v[1], v[2]);
		/* No lookups, no ratio: 0 would say that every lookup missed. */
		if (lookups)
			printf("%.6f", (double)v[1] / lookups);
		else
			fputs("null", stdout);
		printf(", \"bytes_filled\": %" PRIu64 ", \"bytes_served\": %" PRIu64
		       ", \"bytes_saved\": %" PRIu64 ", \"invalidations\": %" PRIu64,
		       v[3], v[4], saved, v[5]);
		printf(", \"map_enabled\": %s",
		       on < 0 ? "null" : on & MAPPINGS_SHARED ? "true" : "false");
		if (mapped)
			printf(", \"mapped_aliases\": %" PRIu64 ", \"mapped_pages\": %" PRIu64
			       ", \"mapped_bytes\": %" PRIu64 ", \"mapped_attaches\": %" PRIu64
			       ", \"mapped_bytes_read\": %" PRIu64 "}\n", v[6], v[7],
			       v[7] * (uint64_t)getpagesize(), v[8], v[9]);
		else
			fputs(", \"mapped_aliases\": null, \"mapped_pages\": null"
			      ", \"mapped_bytes\": null, \"mapped_attaches\": null"
			      ", \"mapped_bytes_read\": null}\n", stdout);
		return EXIT_OK;
	}
	printf("%s (btrfs %s): shared extent cache %s\n", mnt[0] ? mnt : *path, uuid,
	       on < 0 ? "state unknown (no mount id in this kernel)" :
	       on ? "on" : "off (mount -o remount,shared_cache turns it on)");
	printf("  resident       %s (%" PRIu64 " pages)\n",
	       human(v[0] * (uint64_t)getpagesize(), h1, sizeof(h1)), v[0]);
	printf("  hits / misses  %" PRIu64 " / %" PRIu64, v[1], v[2]);
	if (lookups)
		printf(" (%.1f%% hits)\n", 100.0 * v[1] / lookups);
	else
		printf(" (no lookups yet)\n");
	printf("  served         %s, of which %s filled from disk\n",
	       human(v[4], h2, sizeof(h2)), human(v[3], h3, sizeof(h3)));
	printf("  saved          %s of disk reads and page cache copies\n",
	       human(saved, h4, sizeof(h4)));
	printf("  invalidations  %" PRIu64 "\n", v[5]);
	if (mapped && on > 0)
		printf("  map sharing    %s\n", on & MAPPINGS_SHARED ? "on (shared_cache_map)" :
		       "off (mount -o remount,shared_cache_map turns it on)");
	if (mapped)
		printf("  mappings       %s in %" PRIu64 " shared cop%s of read-only files;"
		       " %" PRIu64 " mappings bound, %s read from disk\n",
		       human(v[7] * (uint64_t)getpagesize(), h1, sizeof(h1)), v[6],
		       v[6] == 1 ? "y" : "ies", v[8], human(v[9], h2, sizeof(h2)));
	return EXIT_OK;
}

static int cmd_stat(int argc, char **argv)
{
	const char *path = NULL;
	int rc = run_stat(argc, argv, &path);

	if (rc < 0)
		return EXIT_OK;		/* --help */
	/* The mount point is known only once the counters are read. */
	if (rc && json) {
		json_begin(rc);
		json_field("path", path);
		json_field("mountpoint", NULL);
		puts("}");
	}
	return rc;
}

/* Output that went nowhere, a full disk or a closed pipe, is no success. */
static int close_stdout(int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout) && fclose(stdout) == 0)
		return rc;
	err("cannot write standard output: %s", strerror(errno));
	return rc ? rc : EXIT_FAIL;
}

static int run_command(int argc, char **argv)
{
	const char *cmd = argc >= 1 ? argv[0] : "";
	int rc;

	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "clone"))
		return cmd_clone(argc, argv);
	if (!strcmp(cmd, "stat"))
		return cmd_stat(argc, argv);
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
		rc = EXIT_OK;
		if (!json)
			printf("pcshare %s\n", PCSHARE_VERSION);
	} else if (!*cmd) {
		rc = usage_error("no command given");
	} else {
		rc = usage_error("unknown %s '%s'", *cmd == '-' ? "option" : "command", cmd);
	}
	if (json)
		json_end(rc);	/* the version is in every object */
	return rc;
}

int main(int argc, char **argv)
{
	int i = 1;

	/* Seen before parsing, so that even a usage error is reported as JSON. */
	json = wants_json(argc, argv);
	/* The one global option: --json may come before the command too. */
	while (i < argc && !strcmp(argv[i], "--json"))
		i++;
	return close_stdout(run_command(argc - i, argv + i));
}
