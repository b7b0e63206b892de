/* fileio.c - safe reads, atomic writes, checked stdout, escaped text,
 * CRC-32 (what each promises is in fileio.h). */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading ------------------------------------------------------------- */

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

FILE *fio_open_read(const char *path, long long *size, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO for reading normally waits for a writer,
     * forever if none comes. Non-blocking, open returns at once and fstat
     * tells us what we got before we read a byte. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file (it is %s)", path, kind_of(st.st_mode));
        close(fd);
        return NULL;
    }
    /* a regular file: back to ordinary blocking reads */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (size) *size = (long long)st.st_size;
    return f;
}

/* ---- atomic writing ------------------------------------------------------- */

/* The folder part of path ("." when there is none). */
static void dir_of(char *dir, size_t cap, const char *path) {
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, cap, ".");
}

int fio_create(FioWriter *w, const char *path, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    char dir[4096];
    dir_of(dir, sizeof dir, path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) {
        snprintf(err, errlen, "'%s' names a folder, not a file", path);
        return 1;
    }
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path ||
        snprintf(w->tmp, sizeof w->tmp, "%s/.%s.XXXXXX", dir, base) >= (int)sizeof w->tmp) {
        snprintf(err, errlen, "the path '%.200s...' is too long", path);
        return 1;
    }
    /* mkstemp picks a name nobody has and creates it with O_CREAT|O_EXCL:
     * it fails rather than follow a symlink or reuse a file, and two runs
     * writing the same path get two different temporaries. */
    int fd = mkstemp(w->tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create '%s' (a temporary in '%s'): %s", path, dir, strerror(errno));
        return 1;
    }
    /* mkstemp makes it 0600; give it the mode a plain fopen would */
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        int e = errno;
        close(fd);
        unlink(w->tmp);
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(e));
        return 1;
    }
    return 0;
}

void fio_abort(FioWriter *w) {
    if (!w->f) return;
    fclose(w->f);
    unlink(w->tmp);
    w->f = NULL;
}

int fio_commit(FioWriter *w, char *err, size_t errlen) {
    if (!w->f) {
        snprintf(err, errlen, "'%s' was not opened for writing", w->path);
        return 1;
    }
    /* fwrite may only fill the stdio buffer: a full disk usually shows at
     * fflush; fsync makes the bytes durable before the rename publishes
     * them; fclose can still fail (NFS). Every one is checked. */
    int e = 0, had_error = ferror(w->f);
    errno = 0;
    if (fflush(w->f) != 0) e = errno ? errno : EIO;
    else if (had_error) e = EIO;   /* an earlier write failed; its errno is gone */
    if (!e && fsync(fileno(w->f)) != 0 && errno != EINVAL && errno != EROFS) e = errno;
    if (fclose(w->f) != 0 && !e) e = errno ? errno : EIO;
    w->f = NULL;
    if (!e && rename(w->tmp, w->path) != 0) e = errno;
    if (e) {
        unlink(w->tmp);
        snprintf(err, errlen, "writing '%s' failed: %s; '%s' was left as it was", w->path, strerror(e),
                 w->path);
        return 1;
    }
    /* the rename itself is durable once the folder is synced (best effort:
     * some file systems refuse, which is harmless) */
    char dir[4096];
    dir_of(dir, sizeof dir, w->path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* ---- two names, one file ---------------------------------------------------- */

/* Whether two names mean the same file is a question for the file system,
 * not for the strings: "m.ckpt", "./m.ckpt", "dir/../m.ckpt", a symlink to
 * it and a hard link all name one inode. stat follows symlinks, so the
 * device and inode numbers it gives are the file's own. */
static int same_inode(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int fio_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    int has_a = stat(a, &sa) == 0, has_b = stat(b, &sb) == 0;
    if (has_a && has_b) return same_inode(&sa, &sb);
    if (has_a || has_b) return 0;   /* one is there, the other not: two files */
    /* neither exists yet (two outputs): the same name in the same folder */
    const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
    if (strcmp(ba ? ba + 1 : a, bb ? bb + 1 : b) != 0) return 0;
    char da[4096], db[4096];
    dir_of(da, sizeof da, a);
    dir_of(db, sizeof db, b);
    if (stat(da, &sa) == 0 && stat(db, &sb) == 0) return same_inode(&sa, &sb);
    return strcmp(da, db) == 0;
}

int fio_check_outputs(const FioArg *args, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (!args[i].path || args[i].use == FIO_READS) continue;
        for (int j = 0; j < n; j++) {
            const FioArg *o = &args[j];
            if (j == i || !o->path || (o->use != FIO_READS && j < i)) continue;   /* each pair of outputs once */
            if (o->use == FIO_READS && args[i].use == FIO_REPLACES) continue;    /* allowed by definition */
            if (!fio_same_file(args[i].path, o->path)) continue;
            char pi[300], pj[300];
            fio_escape(pi, sizeof pi, args[i].path, (size_t)-1);
            fio_escape(pj, sizeof pj, o->path, (size_t)-1);
            if (o->use == FIO_READS)
                snprintf(err, errlen, "%s '%s' is the same file as %s '%s', which this run reads: writing it "
                         "would replace that file; give %s another name", args[i].flag, pi, o->flag, pj, args[i].flag);
            else
                snprintf(err, errlen, "%s '%s' and %s '%s' are the same file: one output would replace the "
                         "other; give each its own name", args[i].flag, pi, o->flag, pj);
            return 1;
        }
    }
    return 0;
}

/* ---- stdout at exit -------------------------------------------------------- */

static const char *g_prog = "program";
static int g_failures;

void fio_note_failure(void) { g_failures++; }
int fio_failures(void) { return g_failures; }

/* Runs from exit(): a program that printed its results into a full disk or
 * /dev/full must not report success. _exit keeps the status at 1 (calling
 * exit again from an atexit handler is undefined). */
static void check_stdout(void) {
    errno = 0;
    int flush_failed = fflush(stdout) != 0;
    int e = errno;
    int lost = flush_failed || ferror(stdout);
    if (lost)
        fprintf(stderr, "%s: error: writing the output failed%s%s\n", g_prog, flush_failed && e ? ": " : "",
                flush_failed && e ? strerror(e) : "");
    if (g_failures)
        fprintf(stderr, "%s: error: %d output file%s could not be written (see above)\n", g_prog, g_failures,
                g_failures == 1 ? "" : "s");
    if (lost || g_failures) _exit(1);
}

void fio_watch_stdout(const char *prog) {
    static int registered;
    g_prog = prog;
    if (!registered && atexit(check_stdout) == 0) registered = 1;
}

void fio_vfail(int code, const char *prog, const char *fmt, va_list ap) {
    fflush(stdout);   /* what the program printed comes before the error */
    fprintf(stderr, "%s: error: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    exit(code);
}

void fio_fail(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fio_vfail(1, prog, fmt, ap);
}

/* ---- escaping ----------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (at most n bytes) that encodes a
 * printable code point, or 0: overlong forms, surrogates, code points past
 * U+10FFFF and the C1 controls U+0080..U+009F (CSI is U+009B) all give 0. */
static size_t utf8_printable(const unsigned char *p, size_t n) {
    size_t len;
    unsigned cp;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) len = 2, cp = p[0] & 0x1F;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) len = 3, cp = p[0] & 0x0F;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4) len = 4, cp = p[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0xA0) return 0;   /* C1 controls */
    return len;
}

char *fio_escape(char *dst, size_t cap, const char *src, size_t n) {
    if (!cap) return dst;
    const unsigned char *p = (const unsigned char *)(src ? src : "");
    if (n == (size_t)-1) n = strlen((const char *)p);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        char piece[8];
        size_t k = 0, used = 1;
        if (p[i] >= 0x20 && p[i] < 0x7F) {
            if (p[i] == '\\') piece[k++] = '\\';
            piece[k++] = (char)p[i];
        } else if (p[i] >= 0x80 && (used = utf8_printable(p + i, n - i)) > 0) {
            memcpy(piece, p + i, used);
            k = used;
        } else {
            used = 1;
            k = (size_t)snprintf(piece, sizeof piece, "\\x%02x", p[i]);
        }
        if (o + k + 4 > cap && i + used < n) {   /* more follows and it will not fit */
            if (o + 4 <= cap) memcpy(dst + o, "...", 3), o += 3;
            break;
        }
        if (o + k + 1 > cap) break;
        memcpy(dst + o, piece, k);
        o += k;
        i += used;
    }
    dst[o] = '\0';
    return dst;
}

/* ---- CRC-32 ----------------------------------------------------------------
 * Bit-reflected CRC with polynomial 0xEDB88320, one table lookup per byte.
 * The table is 256 entries computed once; the check value is in the header. */
static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    crc_ready = 1;
}

uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    if (!crc_ready) crc_init();
    const uint8_t *p = data;
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}
