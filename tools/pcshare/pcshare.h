/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of pcshare share: exit codes, one clone's state, and the
 * functions one file offers another. Not an interface beyond this tool.
 */
#ifndef PCSHARE_H
#define PCSHARE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <sys/stat.h>

#ifndef PCSHARE_VERSION
#define PCSHARE_VERSION "unknown"
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
#define DEFAULT_BUDGET_MS 100

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

extern bool json;

static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* pcshare.c */
void usage(FILE *f);
int bad_option(char **argv, int c);
int parse_size(const char *s, uint64_t *out, bool suffix);

/* output.c: err() and usage_error() also keep the first error for --json. */
void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *human(uint64_t bytes, char *buf, size_t len);
void json_begin(int rc);
void json_end(int rc);
void json_field(const char *key, const char *val);
void show_progress(struct clone_job *job, bool final);

/* clone.c, stat.c: the commands */
int cmd_clone(int argc, char **argv);
int cmd_stat(int argc, char **argv);

/* plan.c */
int plan_clone(struct clone_job *job, const char *dst, const char *method,
	       bool whole, bool *use2);
void remove_created_dst(struct clone_job *job);

/* resume.c */
void identify_src(struct clone_job *job);
void record_progress(struct clone_job *job);
int load_progress(struct clone_job *job);

/* engine.c */
void catch_signals(void);
int clone_run(struct clone_job *job, bool one_call, bool use2);
int clone_failed(struct clone_job *job, int e);

#endif
