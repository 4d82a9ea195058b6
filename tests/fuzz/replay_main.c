/* replay_main.c — runs a libFuzzer harness over a committed corpus without
 * libFuzzer (SQLite fuzzcheck style), so `make test` exercises every decoder
 * on every corpus file with plain gcc and, under SAN=, the sanitizers.
 *
 * Usage: replay_fuzz_X DIR...  Feeds each regular file of each DIR, sorted by
 * name so runs are reproducible, to LLVMFuzzerTestOneInput. Exits 1 when a
 * directory is missing, unreadable or holds no inputs. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads a whole file; NULL on failure. Caller frees. */
static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		/* +1 so an empty file still yields a non-NULL buffer */
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*size = (size_t)n;
	}
	fclose(f);
	return buf;
}

static int is_regular(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Replays every regular file in `dir`; returns how many, or -1. */
static long replay_dir(const char *dir)
{
	struct dirent **names;
	char path[4096];
	long count = 0;
	int n = scandir(dir, &names, NULL, alphasort);

	if (n < 0) {
		fprintf(stderr, "replay: cannot read directory %s\n", dir);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		size_t size = 0;
		uint8_t *data;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		free(names[i]);
		if (!is_regular(path))
			continue;
		data = slurp(path, &size);
		if (!data) {
			fprintf(stderr, "replay: cannot read %s\n", path);
			count = -1;
			continue;
		}
		LLVMFuzzerTestOneInput(data, size);
		free(data);
		if (count >= 0)
			count++;
	}
	free(names);
	return count;
}

int main(int argc, char **argv)
{
	int status = argc > 1 ? 0 : 1;

	if (argc < 2)
		fprintf(stderr, "usage: %s CORPUS_DIR...\n", argv[0]);
	for (int i = 1; i < argc; i++) {
		long n = replay_dir(argv[i]);
		if (n <= 0) {
			if (n == 0)
				fprintf(stderr, "replay: no inputs in %s\n",
					argv[i]);
			status = 1;
			continue;
		}
		printf("replayed %ld inputs from %s\n", n, argv[i]);
	}
	return status;
}
