// SPDX-License-Identifier: GPL-2.0
/*
 * pcshare: clone files without stalling their readers, and show the btrfs
 * shared extent cache's counters. See pcshare(1).
 *
 * This file is the command line; clone.c and stat.c are the commands,
 * plan.c, engine.c and resume.c the steps of a clone, output.c what they
 * print.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "pcshare.h"

bool json;			/* --json, wherever it is */

void usage(FILE *f)
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
"       read-only subvolumes (shared_cache_map_private: private mappings of\n"
"       writable files too): pages, copies, mappings bound, bytes read, files\n"
"       copied before a change and what those copies can hold\n"
"\n"
"exit: 0 done, 1 failed, 2 usage, invalid range or not a regular file,\n"
"3 reflink or cache not available there, 4 out of space (DST can be resumed),\n"
"5 another pcshare clone is writing DST, 128+N killed by signal N (130 SIGINT,\n"
"143 SIGTERM; DST can be resumed). A refused clone leaves DST as it was.\n",
		DEFAULT_BUDGET_MS);
}

/* getopt's own messages would miss --json's "error"; say it ourselves. */
int bad_option(char **argv, int c)
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

/*
 * Digits and, if suffix, one of K M G T in either case (as dd and
 * truncate take them), optionally followed by "iB":
 * strtoull() alone would take " -1" and "+4096" too.
 */
int parse_size(const char *s, uint64_t *out, bool suffix)
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
