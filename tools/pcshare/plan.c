// SPDX-License-Identifier: GPL-2.0
/*
 * Open SRC and DST and check everything that can refuse the clone, all
 * before DST changes: a refused clone leaves DST as it was.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <linux/fs.h>

#include "ficlonerange2.h"
#include "pcshare.h"

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
void remove_created_dst(struct clone_job *job)
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
int plan_clone(struct clone_job *job, const char *dst, const char *method,
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
