/* SPDX-License-Identifier: GPL-2.0 */
/*
 * FICLONERANGE2 as the pcshare kernel series defines it in
 * include/uapi/linux/fs.h (kernel/patches/ficlonerange2/0001-*.patch), for
 * building against headers that predate it.  tests/host/test_abi.py checks
 * that the two definitions agree.
 */
#ifndef PCSHARE_FICLONERANGE2_H
#define PCSHARE_FICLONERANGE2_H

#include <linux/fs.h>
#include <linux/types.h>

#ifndef FICLONERANGE2
struct file_clone_range2 {
	__s64 src_fd;
	__u64 src_offset;
	__u64 src_length;	/* 0: to the source's EOF, written back resolved */
	__u64 dest_offset;
	__u64 flags;		/* must be 0 */
	__u64 budget_ms;	/* return FICLONERANGE2_PARTIAL after this; 0: none */
	__u64 chunk_size;	/* 0: kernel adapts the chunk size */
	__u64 done;		/* in/out cursor: bytes cloned */
	__u64 next_chunk;	/* in/out: adapted chunk size; 0 at first */
	__u64 reserved[3];	/* must be 0 */
};

#define FICLONERANGE2_PARTIAL	1
#define FICLONERANGE2	_IOWR(0x15, 3, struct file_clone_range2)
#endif

#endif
