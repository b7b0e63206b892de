/* fail.h - the library's one way to report a failure of the world.
 *
 * Library code never exits: it writes a plain message into the caller's
 * buffer and returns a non-zero code the caller turns into an exit status
 * (2: bad input, 1: I/O). `return fail(err, errlen, "...", ...)` does both.
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

#endif
