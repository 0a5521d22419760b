/* Small shared helpers: hashing, whole-file I/O, CPU count, clock. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

uint64_t lmq_hash64(const void *data, size_t len)
{
    return (uint64_t)XXH3_64bits(data, len);
}

lmq_status lmq_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lmq_error(errno == ENOENT ? LMQ_ERR_NOT_FOUND : LMQ_ERR_IO, "%s: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lmq_error(LMQ_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return lmq_error(LMQ_ERR_LIMIT, "%s: %lld bytes exceeds the limit of %zu bytes", path,
                         (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return lmq_error(LMQ_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            return lmq_error(LMQ_ERR_IO, "%s: read failed at byte %zu", path, got);
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return LMQ_OK;
}

lmq_status lmq_tmp_name(const char *path, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= cap) return lmq_error(LMQ_ERR_LIMIT, "%s: path too long", path);
    return LMQ_OK;
}

lmq_status lmq_fsync_dir_of(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        if (slash == dir) slash[1] = 0;
        else *slash = 0;
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return LMQ_OK; /* best effort */
    fsync(fd);
    close(fd);
    return LMQ_OK;
}

lmq_status lmq_write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    lmq_status s = lmq_tmp_name(path, tmp, sizeof tmp);
    if (s) return s;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return lmq_error(LMQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return lmq_error(LMQ_ERR_IO, "%s: write failed: %s", path, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        unlink(tmp);
        return lmq_error(LMQ_ERR_IO, "%s: fsync/close failed: %s", path, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return lmq_error(LMQ_ERR_IO, "%s: rename failed: %s", path, strerror(e));
    }
    return lmq_fsync_dir_of(path);
}

int lmq_n_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

double lmq_time_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
