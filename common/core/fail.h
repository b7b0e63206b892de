/* fail.h - the library's one way to report a failure of the world.
 *
 * Library code never exits: it writes a plain message into the caller's
 * buffer and returns a non-zero code the caller turns into an exit status
 * (2: bad input, 1: I/O). `return fail(err, errlen, "...", ...)` does both.
 *
 * One exception, made in one place: the text-processing routines that have
 * no error return (BPE learning and encoding, BLEU counting, reading a
 * corpus) allocate with xmalloc/xcalloc/xrealloc, which on out-of-memory
 * print "out of memory (N bytes)" and exit with status 1.
 */
#ifndef FAIL_H
#define FAIL_H

#include <stddef.h>

/* printf fmt into err (errlen bytes; err may be NULL) and return 2 */
__attribute__((format(printf, 3, 4)))
int fail(char *err, size_t errlen, const char *fmt, ...);
/* the same, returning rc (1 for I/O, 2 for bad input) */
__attribute__((format(printf, 4, 5)))
int fail_rc(int rc, char *err, size_t errlen, const char *fmt, ...);

/* malloc/calloc/realloc that never return NULL (a size of 0 gets 1 byte):
 * out of memory ends the program with status 1 and a message */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);

#endif
