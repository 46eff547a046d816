// SPDX-License-Identifier: GPL-2.0
/* pcshare stat: the shared extent cache counters from sysfs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/btrfs.h>
#include <linux/magic.h>

#include "pcshare.h"

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
#define PRIVATE_SHARED	4	/* and shared_cache_map_private */

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
		if (on && tok && has_option(tok, "shared_cache_map_private"))
			on |= MAPPINGS_SHARED | PRIVATE_SHARED;
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
				       "mapped_bytes_read",
				       /* Since btrfs/0032. */
				       "mapped_kept",
				       /* Since btrfs/0039. */
				       "mapped_kept_bytes",
				       /* Since btrfs/0042. */
				       "mapped_keep_limit", "mapped_keep_reserved",
				       "mapped_keep_refused" };
	const char *sysfs = getenv("PCSHARE_SYSFS") ?: "/sys/fs/btrfs";
	struct btrfs_ioctl_fs_info_args info = { 0 };
	enum { NR_COUNTERS = sizeof(names) / sizeof(names[0]) };
	uint64_t v[NR_COUNTERS], saved, lookups;
	/* Counters the kernel has: each patch adds its own after the last. */
	int have = NR_COUNTERS;
	bool mapped, kept, kept_bytes, keep;
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
	for (i = 0; i < NR_COUNTERS; i++) {
		snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
		e = read_counter(file, text, sizeof(text), &v[i]);
		if (e == ENOENT && i >= 6) {
			if (i < have)
				have = i;
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
	mapped = have >= 10;
	kept = have >= 11;
	kept_bytes = have >= 12;
	keep = have >= NR_COUNTERS;
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
		printf(", \"map_enabled\": %s, \"map_private_enabled\": %s",
		       on < 0 ? "null" : on & MAPPINGS_SHARED ? "true" : "false",
		       on < 0 ? "null" : on & PRIVATE_SHARED ? "true" : "false");
		if (mapped)
			printf(", \"mapped_aliases\": %" PRIu64 ", \"mapped_pages\": %" PRIu64
			       ", \"mapped_bytes\": %" PRIu64 ", \"mapped_attaches\": %" PRIu64
			       ", \"mapped_bytes_read\": %" PRIu64, v[6], v[7],
			       v[7] * (uint64_t)getpagesize(), v[8], v[9]);
		else
			fputs(", \"mapped_aliases\": null, \"mapped_pages\": null"
			      ", \"mapped_bytes\": null, \"mapped_attaches\": null"
			      ", \"mapped_bytes_read\": null", stdout);
		if (kept)
			printf(", \"mapped_kept\": %" PRIu64, v[10]);
		else
			fputs(", \"mapped_kept\": null", stdout);
		if (kept_bytes)
			printf(", \"mapped_kept_bytes\": %" PRIu64, v[11]);
		else
			fputs(", \"mapped_kept_bytes\": null", stdout);
		if (keep)
			printf(", \"mapped_keep_limit\": %" PRIu64 ", \"mapped_keep_reserved\": %"
			       PRIu64 ", \"mapped_keep_refused\": %" PRIu64 "}\n",
			       v[12], v[13], v[14]);
		else
			fputs(", \"mapped_keep_limit\": null, \"mapped_keep_reserved\": null"
			      ", \"mapped_keep_refused\": null}\n", stdout);
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
		printf("  map sharing    %s\n",
		       on & PRIVATE_SHARED ? "on, private maps of writable files too "
		       "(shared_cache_map_private)" :
		       on & MAPPINGS_SHARED ? "on (shared_cache_map)" :
		       "off (mount -o remount,shared_cache_map turns it on)");
	if (mapped)
		printf("  mappings       %s in %" PRIu64 " shared cop%s of mapped files;"
		       " %" PRIu64 " mappings bound, %s read from disk\n",
		       human(v[7] * (uint64_t)getpagesize(), h1, sizeof(h1)), v[6],
		       v[6] == 1 ? "y" : "ies", v[8], human(v[9], h2, sizeof(h2)));
	if (kept)
		printf("  kept           %" PRIu64 " file%s copied before a change, for the private"
		       " maps made before it", v[10], v[10] == 1 ? "" : "s");
	if (kept_bytes)
		printf("; copies still mapped: %s (their files' sizes when copied)",
		       human(v[11], h3, sizeof(h3)));
	if (kept)
		putchar('\n');
	/* Other users than the files' owners share private maps within a budget. */
	if (!keep || (on >= 0 && !(on & PRIVATE_SHARED)))
		return EXIT_OK;
	if (v[12])
		printf("  other users    %s of %s reserved for the copies their private maps may"
		       " keep; %" PRIu64 " maps not shared for want of room\n",
		       human(v[13], h1, sizeof(h1)), human(v[12], h2, sizeof(h2)), v[14]);
	else
		printf("  other users    their private maps are not shared (mapped_keep_limit 0);"
		       " %" PRIu64 " maps\n", v[14]);
	return EXIT_OK;
}

int cmd_stat(int argc, char **argv)
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
