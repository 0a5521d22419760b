/* Replays every file of a fuzz target's seed corpus (a directory, or files
 * given as arguments) through LLVMFuzzerTestOneInput, so ctest exercises the
 * parsers on every build; under LMQ_SANITIZE this catches memory errors. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (!buf) return 1;
    LLVMFuzzerTestOneInput(buf, got);
    /* Every truncation of each seed too: the parsers must fail cleanly at
     * every structural boundary. */
    size_t step = got > 4096 ? got / 512 : 1;
    for (size_t cut = 0; cut < got; cut += step) LLVMFuzzerTestOneInput(buf, cut);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "replay: %s missing\n", argv[i]); return 1; }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                rc |= run_file(p);
                files++;
            }
            if (d) closedir(d);
        } else {
            rc |= run_file(argv[i]);
            files++;
        }
    }
    if (files == 0) { fprintf(stderr, "replay: empty corpus\n"); return 1; }
    printf("%d passed, %d failed\n", rc ? 0 : files, rc ? files : 0);
    return rc;
}
