// SPDX-License-Identifier: GPL-2.0
/* The record on DST that lets --resume continue an interrupted clone. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <linux/fs.h>
#include <linux/magic.h>

#include "pcshare.h"

#define RECORD_VERSION 3

#ifndef FS_IOC_GETFSUUID	/* Linux 6.5; older headers lack it */
struct fsuuid2 {
	__u8 len;
	__u8 uuid[16];
};
#define FS_IOC_GETFSUUID _IOR(0x15, 0, struct fsuuid2)
#endif

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
void identify_src(struct clone_job *job)
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
void record_progress(struct clone_job *job)
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

int load_progress(struct clone_job *job)
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
