/* clock.h - the one clock: seconds for measuring how long something took.
 *
 * Wall time (what a user waits) and CPU time (what the cores spent: on two
 * busy threads it runs twice as fast as the wall) are different questions;
 * a program says which one it prints.
 */
#ifndef CLOCK_H
#define CLOCK_H

double clock_wall_s(void);     /* monotonic wall-clock seconds (CLOCK_MONOTONIC)       */
double clock_cpu_s(void);      /* this process's CPU seconds, every thread together    */
double clock_thread_s(void);   /* the calling thread's CPU seconds                     */

#endif
