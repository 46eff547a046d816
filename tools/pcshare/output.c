// SPDX-License-Identifier: GPL-2.0
/* What pcshare prints: messages (the first kept for --json), JSON, progress. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "pcshare.h"

static const char *prog = "pcshare";
static char error_msg[3 * PATH_MAX];	/* the first error, for --json */

static void verr(const char *fmt, va_list ap)
{
	char msg[sizeof(error_msg)];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "%s: %s\n", prog, msg);
	if (!error_msg[0])
		snprintf(error_msg, sizeof(error_msg), "%s", msg);
}

void err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(fmt, ap);
	va_end(ap);
}

/* One line on what is wrong, one on where to look: not the whole help. */
int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(fmt, ap);
	va_end(ap);
	fprintf(stderr, "try '%s --help'\n", prog);
	return EXIT_USAGE;
}

const char *human(uint64_t bytes, char *buf, size_t len)
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
void json_begin(int rc)
{
	fputs("{\"version\": ", stdout);
	json_str(PCSHARE_VERSION);
	printf(", \"exit_status\": %d, \"error\": ", rc);
	json_str(rc ? error_msg : NULL);
}

void json_end(int rc)
{
	json_begin(rc);
	puts("}");
}

void json_field(const char *key, const char *val)
{
	printf(", \"%s\": ", key);
	json_str(val);
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
void show_progress(struct clone_job *job, bool final)
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
