/*
 * forkspike: the fork-exec memory spike of a large pre-forking server (the "Ruby on Rails"
 * pattern): a process holding N bytes forks; the child writes to its copy-on-write copy, so
 * the pod briefly needs up to twice the memory, and then execs a small program.
 *
 * Why C and not Go: after a raw fork only the calling thread survives, and Go code may need
 * the runtime (allocation, stack growth, locks held by threads that no longer exist) at any
 * point, so dirtying memory between fork and exec is not safe in Go. Here the child is plain
 * single-threaded C. Build statically (gcc -static) so the image needs no libc.
 *
 * Normally started through `swapstress forkspike`, which parses sizes like "64Mi" and execs
 * this helper with plain integers:
 *   forkspike -H HOLD_BYTES [-d CHILD_DIRTY_BYTES] [-r REPEAT] [-i INTERVAL_MS]
 *             [-c CHILD_HOLD_MS] [-a HOLD_AFTER_MS|-1] [-- EXEC_PATH [ARGS...]]
 * Without EXEC_PATH the child execs this binary with "--noop", which exits 0 at once.
 *
 * Output, one event per line (a single write(2) each):
 *   holding B | forked PID iteration=I | child-dirtied B pid=P | child-exec PATH pid=P
 *   child-exited CODE iteration=I | child-killed SIGNAL iteration=I | done failures=F
 *   holding-after B | exiting signal=terminated
 * Exit status: 0 when every child exited 0, 2 if a child was killed by a signal, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void emit(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = sizeof line - 2;
    line[n++] = '\n';
    /* One write per line: stdio buffers would be duplicated by fork and lost on SIGKILL. */
    ssize_t off = 0;
    while (off < n) {
        ssize_t w = write(STDOUT_FILENO, line + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        off += w;
    }
}

static void on_term(int sig) {
    (void)sig;
    static const char msg[] = "exiting signal=terminated\n";
    (void)!write(STDOUT_FILENO, msg, sizeof msg - 1);
    _exit(0);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (*s == '-' || *s == '\0') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_ms(const char *s, long *out) { /* -1 means forever */
    uint64_t v;
    if (strcmp(s, "-1") == 0) { *out = -1; return 0; }
    if (parse_u64(s, &v) || v > 1000ULL * 86400 * 365) return -1;
    *out = (long)v;
    return 0;
}

/* Write one byte per page; each value differs from what the parent wrote, never zero. */
static void touch(unsigned char *mem, uint64_t len, long page, unsigned char salt) {
    for (uint64_t i = 0; i < len; i += (uint64_t)page)
        mem[i] = (unsigned char)(((i / (uint64_t)page) | 1) ^ salt);
}

static void usage(void) {
    fprintf(stderr, "usage: forkspike -H HOLD_BYTES [-d CHILD_DIRTY_BYTES] [-r REPEAT] "
                    "[-i INTERVAL_MS] [-c CHILD_HOLD_MS] [-a HOLD_AFTER_MS|-1] "
                    "[-- EXEC_PATH [ARGS...]]\n");
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--noop") == 0) return 0;

    uint64_t hold = 0, dirty = 0, repeat = 1;
    int have_hold = 0, have_dirty = 0;
    long interval_ms = 0, child_hold_ms = 0, hold_after_ms = 0;
    int opt;
    while ((opt = getopt(argc, argv, "+H:d:r:i:c:a:")) != -1) {
        int bad = 0;
        switch (opt) {
        case 'H': bad = parse_u64(optarg, &hold); have_hold = 1; break;
        case 'd': bad = parse_u64(optarg, &dirty); have_dirty = 1; break;
        case 'r': bad = parse_u64(optarg, &repeat) || repeat == 0; break;
        case 'i': bad = parse_ms(optarg, &interval_ms) || interval_ms < 0; break;
        case 'c': bad = parse_ms(optarg, &child_hold_ms) || child_hold_ms < 0; break;
        case 'a': bad = parse_ms(optarg, &hold_after_ms); break;
        default: usage(); return 64;
        }
        if (bad) { fprintf(stderr, "forkspike: invalid value for -%c: %s\n", opt, optarg); return 64; }
    }
    if (!have_hold || hold == 0) { usage(); return 64; }
    if (!have_dirty || dirty > hold) dirty = hold;

    char *self_argv[] = {"/proc/self/exe", "--noop", NULL};
    char **exec_argv = optind < argc ? &argv[optind] : self_argv;
    const char *exec_path = exec_argv[0];

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    long page = sysconf(_SC_PAGESIZE);
    unsigned char *mem = mmap(NULL, hold, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) { emit("error \"mmap %" PRIu64 ": %s\"", hold, strerror(errno)); return 1; }
    /* 4 KiB pages: each child write copies one page, so the spike is exactly CHILD_DIRTY. */
    madvise(mem, hold, MADV_NOHUGEPAGE);
    touch(mem, hold, page, 0);
    emit("holding %" PRIu64, hold);

    int killed = 0, failed = 0;
    for (uint64_t it = 1; it <= repeat; it++) {
        pid_t pid = fork();
        if (pid < 0) { emit("error \"fork: %s\"", strerror(errno)); return 1; }
        if (pid == 0) {
            touch(mem, dirty, page, 0x80);
            emit("child-dirtied %" PRIu64 " pid=%d", dirty, (int)getpid());
            if (child_hold_ms > 0) sleep_ms(child_hold_ms);
            emit("child-exec %s pid=%d", exec_path, (int)getpid());
            execv(exec_path, exec_argv);
            emit("child-exec-failed %s errno=%d", exec_path, errno);
            _exit(127);
        }
        emit("forked %d iteration=%" PRIu64, (int)pid, it);
        int status;
        while (waitpid(pid, &status, 0) < 0) {
            if (errno != EINTR) { emit("error \"waitpid: %s\"", strerror(errno)); return 1; }
        }
        if (WIFSIGNALED(status)) {
            killed++;
            emit("child-killed %d iteration=%" PRIu64, WTERMSIG(status), it);
        } else {
            if (WEXITSTATUS(status) != 0) failed++;
            emit("child-exited %d iteration=%" PRIu64, WEXITSTATUS(status), it);
        }
        if (it < repeat && interval_ms > 0) sleep_ms(interval_ms);
    }
    emit("done failures=%d", killed + failed);
    if (hold_after_ms != 0) {
        emit("holding-after %" PRIu64, hold);
        if (hold_after_ms < 0) for (;;) pause();
        sleep_ms(hold_after_ms);
        emit("released");
    }
    return killed ? 2 : failed ? 1 : 0;
}
