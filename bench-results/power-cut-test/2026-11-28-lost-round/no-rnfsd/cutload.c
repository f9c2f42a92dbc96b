// The power-cut test's writes without rnfsd: writer threads write 32 KiB
// units (8 self-describing 4 KiB blocks) and make them durable as the
// server does (sync_file_range(WRITE), then WAIT_BEFORE|WRITE|WAIT_AFTER,
// then a journal commit through an O_TMPFILE marker's times + fsync), or
// with the file's own fsync; a namespace thread creates and renames with a
// marker commit after each. At the moment the filesystem is shut down
// (FS_IOC_SHUTDOWN, NOLOGFLUSH, as `xfs_io -x -c shutdown`); replies that
// complete after the cut began are not counted. The acknowledged state is
// written to a file; `cutload verify DIR STATE` checks it after a remount.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096
#define UNIT 8
#define MAGIC 0x52414e44u
#define MAXGEN 100000
#define FS_IOC_SHUTDOWN _IOR('X', 125, uint32_t)

static const char *dir;
static int marker = -1;
static atomic_int cutting;
static pthread_mutex_t commit_lock = PTHREAD_MUTEX_INITIALIZER;

struct writer {
    int id, append, ownsync;
    pthread_t t;
    uint32_t acked[MAXGEN * UNIT / 8]; /* block -> generation (rewriters use 8 units) */
    long acked_blocks, ops;
};

static void fill(unsigned char *b, uint32_t file, uint32_t blk, uint32_t gen) {
    memset(b, (unsigned char)(file * 31u + blk * 7u + gen), BLOCK);
    uint32_t w[4] = {MAGIC, file, blk, gen};
    for (int i = 0; i < 4; i++) {
        b[i * 4] = w[i] >> 24; b[i * 4 + 1] = w[i] >> 16; b[i * 4 + 2] = w[i] >> 8; b[i * 4 + 3] = w[i];
    }
}

static int journal_commit(void) {
    struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    if (futimens(marker, ts)) return -1;
    return fsync(marker);
}

static void *write_loop(void *arg) {
    struct writer *w = arg;
    char name[64];
    snprintf(name, sizeof name, "%s/w%d", dir, w->id);
    int fd = open(name, O_CREAT | O_WRONLY, 0644);
    if (fd < 0) return NULL;
    static __thread unsigned char buf[BLOCK * UNIT];
    for (uint32_t gen = 1; gen < MAXGEN && !cutting; gen++) {
        uint64_t u = w->append ? gen - 1 : gen % 8;
        if (u * UNIT >= sizeof w->acked / sizeof w->acked[0]) break;
        for (int i = 0; i < UNIT; i++) fill(buf + i * BLOCK, w->id + 1000, u * UNIT + i, gen);
        if (pwrite(fd, buf, sizeof buf, u * sizeof buf) != (ssize_t)sizeof buf) break;
        int r;
        if (w->ownsync) {
            r = fsync(fd);
        } else {
            r = sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
            if (!r) r = sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
            if (!r) { pthread_mutex_lock(&commit_lock); r = journal_commit(); pthread_mutex_unlock(&commit_lock); }
        }
        if (r || cutting) break;
        for (int i = 0; i < UNIT; i++) w->acked[u * UNIT + i] = gen;
        w->ops++;
    }
    close(fd);
    return NULL;
}

static long names_acked;
static char (*names)[32];
static void *names_loop(void *arg) {
    (void)arg;
    names = calloc(1000000, 32);
    for (long n = 0; n < 1000000 && !cutting; n++) {
        char c[64], r[64];
        snprintf(c, sizeof c, "%s/c%ld", dir, n);
        int fd = open(c, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0) break;
        close(fd);
        const char *final = c;
        if (n % 3 == 1) {
            snprintf(r, sizeof r, "%s/r%ld", dir, n);
            if (rename(c, r)) break;
            final = r;
        }
        pthread_mutex_lock(&commit_lock);
        int e = journal_commit();
        pthread_mutex_unlock(&commit_lock);
        if (e || cutting) break;
        snprintf(names[names_acked++], 32, "%s", strrchr(final, '/') + 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "verify")) {
        dir = argv[2];
        FILE *s = fopen(argv[3], "r");
        char kind[8], name[64];
        long a, b, lost = 0, checked = 0, lostnames = 0, names = 0;
        static unsigned char blk[BLOCK], want[BLOCK];
        while (s && fscanf(s, "%7s %63s %ld %ld", kind, name, &a, &b) == 4) {
            char p[256];
            snprintf(p, sizeof p, "%s/%s", dir, name);
            if (kind[0] == 'N') {
                names++;
                if (access(p, F_OK)) { lostnames++; printf("LOST name %s\n", name); }
                continue;
            }
            int fd = open(p, O_RDONLY);
            checked++;
            ssize_t n = fd < 0 ? -1 : pread(fd, blk, BLOCK, a * BLOCK);
            struct stat st = {0};
            if (fd >= 0) fstat(fd, &st);
            if (fd >= 0) close(fd);
            int ok = 0;
            uint32_t g = 0;
            if (n == BLOCK) {
                g = (uint32_t)blk[12] << 24 | blk[13] << 16 | blk[14] << 8 | blk[15];
                fill(want, atoi(name + 1) + 1000, a, g);
                ok = !memcmp(blk, want, BLOCK) && g >= (uint32_t)b;
            }
            if (!ok) {
                int zero = n == BLOCK;
                for (int i = 0; zero && i < BLOCK; i++) zero = !blk[i];
                lost++;
                if (lost <= 20) printf("LOST %s block %ld: acked gen %ld, read %zd bytes (%s, gen field %u), size %lld\n", name, a, b, n, zero ? "zeros" : n == BLOCK ? "other" : "short", g, (long long)st.st_size);
            }
        }
        printf("checked %ld blocks, %ld names: lost %ld blocks, %ld names\n", checked, names, lost, lostnames);
        return lost || lostnames ? 1 : 0;
    }
    if (argc < 5) { fprintf(stderr, "usage: cutload DIR MOMENT_MS WRITERS STATE | cutload verify DIR STATE\n"); return 2; }
    dir = argv[1];
    int ms = atoi(argv[2]), nw = atoi(argv[3]);
    marker = open(dir, O_TMPFILE | O_RDWR, 0600);
    if (marker < 0) { perror("marker"); return 2; }
    struct writer *w = calloc(nw, sizeof *w);
    pthread_t nt;
    for (int i = 0; i < nw; i++) {
        w[i].id = i; w[i].append = i % 2; w[i].ownsync = (i / 2) % 2;
        pthread_create(&w[i].t, NULL, write_loop, &w[i]);
    }
    pthread_create(&nt, NULL, names_loop, NULL);
    usleep(ms * 1000);
    cutting = 1;
    int dfd = open(dir, O_RDONLY);
    uint32_t how = 2; /* FS_GOING_FLAGS_NOLOGFLUSH */
    if (ioctl(dfd, FS_IOC_SHUTDOWN, &how)) { perror("shutdown"); return 2; }
    for (int i = 0; i < nw; i++) pthread_join(w[i].t, NULL);
    pthread_join(nt, NULL);
    FILE *s = fopen(argv[4], "w");
    long blocks = 0, ops = 0;
    for (int i = 0; i < nw; i++) {
        ops += w[i].ops;
        for (long b = 0; b < (long)(sizeof w[i].acked / sizeof w[i].acked[0]); b++)
            if (w[i].acked[b]) { fprintf(s, "B w%d %ld %u\n", i, b, w[i].acked[b]); blocks++; }
    }
    for (long n = 0; n < names_acked; n++) fprintf(s, "N %s 0 0\n", names[n]);
    fclose(s);
    printf("cut at %d ms: %ld syncs acknowledged (%ld blocks, %.1f MiB of writes), %ld names\n", ms, ops, blocks, ops * 32.0 / 1024, names_acked);
    return 0;
}
