// SPDX-License-Identifier: GPL-2.0
/*
 * asyncread: copy a file to stdout through io_uring or Linux AIO buffered
 * reads, one request of BS bytes in flight at a time, so a test can hash
 * what those interfaces return.  Raw system calls: neither liburing nor
 * libaio is needed.
 *
 * usage: asyncread uring|aio FILE [BS]     exit 0 ok, 1 I/O error, 2 usage
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int write_all(const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(STDOUT_FILENO, buf, len);

		if (n < 0)
			return -1;
		buf += n;
		len -= n;
	}
	return 0;
}

struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r)
{
	struct io_uring_params p = { 0 };
	void *sq, *cq;

	r->fd = syscall(__NR_io_uring_setup, 1, &p);
	if (r->fd < 0)
		return -1;
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned int),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		  IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		  IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
		return -1;
	r->sq_tail = (unsigned int *)((char *)sq + p.sq_off.tail);
	r->sq_mask = (unsigned int *)((char *)sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)((char *)sq + p.sq_off.array);
	r->cq_head = (unsigned int *)((char *)cq + p.cq_off.head);
	r->cq_tail = (unsigned int *)((char *)cq + p.cq_off.tail);
	r->cq_mask = (unsigned int *)((char *)cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)((char *)cq + p.cq_off.cqes);
	return 0;
}

/* One IORING_OP_READ; returns its result (bytes or -errno). */
static long ring_read(struct ring *r, int fd, char *buf, size_t len, off_t off)
{
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
	struct io_uring_sqe *sqe = &r->sqes[idx];
	long res;

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READ;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS,
		    NULL, 0) < 0)
		return -errno;
	head = *r->cq_head;
	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return -EIO;	/* GETEVENTS returned with no completion */
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

/* One IOCB_CMD_PREAD; returns its result (bytes or -errno). */
static long aio_read(aio_context_t ctx, int fd, char *buf, size_t len, off_t off)
{
	struct iocb cb = { 0 }, *cbs[1] = { &cb };
	struct io_event ev;

	cb.aio_fildes = fd;
	cb.aio_lio_opcode = IOCB_CMD_PREAD;
	cb.aio_buf = (uintptr_t)buf;
	cb.aio_nbytes = len;
	cb.aio_offset = off;
	if (syscall(__NR_io_submit, ctx, 1, cbs) != 1)
		return -errno;
	if (syscall(__NR_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
		return -errno;
	return ev.res;
}

int main(int argc, char **argv)
{
	size_t bs = argc > 3 ? strtoul(argv[3], NULL, 0) : 65536;
	int uring = argc > 2 && !strcmp(argv[1], "uring");
	aio_context_t ctx = 0;
	struct ring r;
	off_t off = 0;
	char *buf;
	long n;
	int fd;

	if (argc < 3 || argc > 4 || (!uring && strcmp(argv[1], "aio")) || !bs) {
		fprintf(stderr, "usage: asyncread uring|aio FILE [BS]\n");
		return 2;
	}
	fd = open(argv[2], O_RDONLY);
	buf = malloc(bs);
	if (fd < 0 || !buf) {
		fprintf(stderr, "asyncread: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	if (uring ? ring_init(&r) : syscall(__NR_io_setup, 1, &ctx)) {
		fprintf(stderr, "asyncread: %s setup: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (;;) {
		n = uring ? ring_read(&r, fd, buf, bs, off) :
			    aio_read(ctx, fd, buf, bs, off);
		if (n <= 0)
			break;
		if (write_all(buf, n)) {
			fprintf(stderr, "asyncread: stdout: %s\n", strerror(errno));
			return 1;
		}
		off += n;
	}
	if (n < 0) {
		fprintf(stderr, "asyncread: %s at %lld: %s\n", argv[2],
			(long long)off, strerror(-n));
		return 1;
	}
	return 0;
}
