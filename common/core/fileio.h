/* fileio.h - reading files from strangers, writing files that are never
 * half there, and printing text we did not write.
 *
 * Six small tools, used by every loader and writer in common/ (and the
 * chapters that name files on their command lines):
 *
 *   fio_open_read    opens a file for reading only if it is a regular file.
 *                    A FIFO, a device or a folder is refused at once; the
 *                    open itself is non-blocking, so a FIFO with no writer
 *                    cannot hang us.
 *   FioWriter        writes path atomically: the bytes go to a fresh,
 *                    uniquely named temporary in path's folder (mkstemp:
 *                    O_CREAT|O_EXCL, so a symlink planted there is never
 *                    followed), every write, the flush, fsync and fclose are
 *                    checked, and only then is it renamed over path (and the
 *                    folder fsynced). On any failure the temporary is
 *                    removed: path is either the old file or the new one,
 *                    never a partial one.
 *   fio_watch_stdout at exit, flushes stdout and checks for errors (a full
 *                    disk, >/dev/full, a closed pipe): a program whose output
 *                    was lost exits 1 with a message instead of 0. Output
 *                    files that failed (fio_note_failure) do the same.
 *   fio_escape       makes untrusted bytes safe to print: control bytes,
 *                    C1 controls and invalid UTF-8 become \xHH, so a token or
 *                    tensor name from a file cannot move the cursor, retitle
 *                    the window or forge a line of output.
 *   crc32_update     the CRC-32 that checkpoints and BPE files end with, to
 *                    tell a damaged file from a good one.
 *   fio_same_file    whether two names are one file (by device and inode),
 *                    and fio_check_outputs, which refuses a run whose output
 *                    would replace one of its inputs or another output.
 *
 * Exit codes follow the project's rule: 2 for bad input (a FIFO where a
 * file should be), 1 for a failure of the world (I/O).
 */
#ifndef FILEIO_H
#define FILEIO_H

#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* Opens path for reading ("rb") if it is a regular file; *size (may be
 * NULL) gets its size in bytes. NULL with a message in err otherwise:
 *   "cannot open 'f': No such file or directory"
 *   "'f' is not a regular file (it is a FIFO)"                            */
FILE *fio_open_read(const char *path, long long *size, char *err, size_t errlen);

typedef struct {
    FILE *f;            /* write here (fwrite, fprintf, ...)                */
    char path[4096];    /* the file it will become                          */
    char tmp[4096];     /* the temporary: "DIR/.NAME.XXXXXX"                */
} FioWriter;

/* Creates the temporary for path. Returns 0, or 1 with a message in err
 * (folder missing or read-only, name too long, ...). */
int fio_create(FioWriter *w, const char *path, char *err, size_t errlen);
/* Checks every write so far, flushes, fsyncs and closes the temporary, then
 * renames it over path and fsyncs the folder. Returns 0, or 1 with a message
 * in err (e.g. "writing 'out/a.dat' failed: No space left on device"); the
 * temporary is removed and path left as it was. */
int fio_commit(FioWriter *w, char *err, size_t errlen);
/* Gives up: closes and removes the temporary. path is untouched. */
void fio_abort(FioWriter *w);

/* Registers the at-exit check of stdout (once per process; prog names the
 * program in the message). cli_parse calls it. */
void fio_watch_stdout(const char *prog);
/* Counts an output file that could not be written (after its message was
 * printed): the program will exit 1 at the end. */
void fio_note_failure(void);
int fio_failures(void);

/* Copies src (n bytes, or up to its NUL when n == (size_t)-1) into dst
 * (cap bytes, always NUL-terminated) with every byte that is not printable
 * ASCII or valid, printable UTF-8 written as \xHH, and '\' as "\\". Cut
 * with "..." when it does not fit. Returns dst. */
char *fio_escape(char *dst, size_t cap, const char *src, size_t n);

/* 1 when a and b name the same file. When both exist: the same device and
 * inode (stat), so "m.ckpt", "./m.ckpt", a symlink to it and a hard link
 * are all one file. When neither exists yet: the same name in the same
 * folder. When one exists and the other not: 0. */
int fio_same_file(const char *a, const char *b);

/* One file named on a command line, for fio_check_outputs. */
typedef enum {
    FIO_READS,      /* the run reads it (--load, --batch-file)                     */
    FIO_WRITES,     /* the run writes it (--export-safetensors, --dump)            */
    FIO_REPLACES,   /* the run writes it and may replace a file it read: chapter
                       08's checkpoint continuing its --resume file                */
} FioUse;
typedef struct {
    const char *flag;   /* "--load", or words: "the checkpoint"             */
    const char *path;   /* NULL: not given                                  */
    FioUse use;
} FioArg;

/* Checks, before anything is written, that no file the run writes is the
 * same file (fio_same_file) as one it reads (a FIO_REPLACES file excepted)
 * or as another file it writes: either way a saved file would be silently
 * lost. Returns 0, or 1 with a message in err (paths escaped), e.g.
 *   "--export-safetensors './m.ckpt' is the same file as --load 'm.ckpt',
 *    which this run reads: writing it would replace that file; give
 *    --export-safetensors another name"                                     */
int fio_check_outputs(const FioArg *args, int n, char *err, size_t errlen);

/* CRC-32 (IEEE 802.3, the polynomial zlib, PNG and gzip use). Chains:
 * crc32_update(crc32_update(0, a, na), b, nb) is the CRC of a then b.
 * crc32_update(0, "123456789", 9) == 0xCBF43926 (the standard check value). */
uint32_t crc32_update(uint32_t crc, const void *data, size_t n);

/* "prog: error: ..." on stderr, exit 1: for I/O failures (cli_fail is for
 * bad input and exits 2). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
_Noreturn void fio_fail(const char *prog, const char *fmt, ...);
/* the same with a va_list and an exit code (cli_fail: 2) */
_Noreturn void fio_vfail(int code, const char *prog, const char *fmt, va_list ap);

#endif
