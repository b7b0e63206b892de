/* rss.h - how much memory this process holds: what a run reports beside
 * what it computed it needs (chapter 11's memory lines). */
#ifndef RSS_H
#define RSS_H

/* Bytes resident now (Linux's /proc/self/statm); where that cannot be read,
 * the peak so far (rss_peak). */
double rss_now(void);
/* The most bytes resident at once so far (getrusage's ru_maxrss). */
double rss_peak(void);

#endif
