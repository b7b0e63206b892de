/* floor.c - what a training step cannot beat, and the machine it ran on.
 *
 * The GEMM floor: every matrix product of one training step, in FLOPs,
 * divided by the best rate this machine's best sgemm reached in the same
 * bench run (ours or OpenBLAS, whichever was faster on the gemm table). A
 * step cannot take less: the products alone need that long even at the
 * best shape's speed; everything else (layer norm, softmax, dropout, Adam,
 * the gradient check) only adds. "step / floor" is how far from it we are.
 *
 * The load: /proc/loadavg's 1-minute average, read before and after each
 * timed part, so every figure carries the load it was taken under.
 *
 * The core-to-core trip: the time for one cache line to go from one thread
 * to another and back. A multi-threaded step hands rows between the cores
 * hundreds of times, so this bounds what a second thread gains on small
 * models. On a virtual machine it moves with where the host puts the
 * vCPUs: this project's 2-vCPU machine measured 70-130 ns at some times
 * and 370-600 ns at others within one hour, and chapter 08's 2-thread step
 * followed (about 6 against 7.6-9 ms; bench/README.md).
 *
 * The hog: a CPU-bound child process (a busy loop), for the busy-core
 * run: "with another program busy on one of two cores, is the 2-thread
 * step no slower than 1.1x the 1-thread step?" busy_cpus_take confines the
 * bench (and the children it starts) to two CPUs, so that the question is
 * the same on a machine of 2 cores or 64, and the hog spins on the second.
 */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "core/clock.h"

/* 2 M N K for C (M,N) = A (M,K) B (K,N) */
static double mm(double M, double N, double K) { return 2.0 * M * N * K; }

/* One attention sub-layer of Sec. 3.2.2, forward: the four projections
 * (queries from Nq = B*Tq rows, keys and values from Nk = B*Tk rows) and,
 * per (sequence, head), Q K^T and the weights times V (h heads of d_k = d/h
 * columns: together B * Tq * Tk * d multiply-adds each). */
static double attention_flops(int B, int Tq, int Tk, int d) {
    double Nq = (double)B * Tq, Nk = (double)B * Tk;
    return mm(Nq, d, d) + 2 * mm(Nk, d, d) + mm(Nq, d, d)   /* W_Q; W_K, W_V; W_O */
           + 2 * mm((double)B * Tq, Tk, d);                   /* Q K^T; weights V  */
}

double step_matmul_flops(int N, int d, int d_ff, int vocab, int B, int Ts, int Tt) {
    double Ns = (double)B * Ts, Nt = (double)B * Tt;
    double enc = attention_flops(B, Ts, Ts, d) + mm(Ns, d_ff, d) + mm(Ns, d, d_ff);   /* Eq. (2) */
    double dec = attention_flops(B, Tt, Tt, d) + attention_flops(B, Tt, Ts, d)       /* self, cross */
                 + mm(Nt, d_ff, d) + mm(Nt, d, d_ff);
    double fwd = N * (enc + dec) + mm(Nt, vocab, d);          /* + logits = y E^T (Sec. 3.4) */
    /* backward: every product Y = X W needs dX = dY W^T and dW = X^T dY,
     * each as many FLOPs as the forward product; attention's two products
     * likewise need two each. So a step is 3 forwards' worth. */
    return 3.0 * fwd;
}

double load_1min(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* Two threads take turns writing one counter, TRIP_TURNS turns each: the
 * median of 5 runs, in ns per round trip. -1 when it cannot be measured:
 * the process may run on one processor only (taskset, a cpuset, a 1-CPU
 * machine; the two threads would then take turns by time slices, a few ms
 * a turn, minutes in all), or a run took over TRIP_GIVE_UP_S (the partner
 * lost its core to another program): each waiting loop looks at the clock
 * now and then and gives up. */
#define TRIP_TURNS 5000
#define TRIP_GIVE_UP_S 0.2
static _Atomic long trip_turn __attribute__((aligned(64)));
static _Atomic int trip_stop;

/* waits until trip_turn is want; 0, or -1 when the run was given up */
static int trip_wait(long want, double deadline) {
    for (long spins = 1; atomic_load(&trip_turn) != want; spins++) {
        if (atomic_load_explicit(&trip_stop, memory_order_relaxed)) return -1;
        if (spins % 4096 == 0 && clock_wall_s() > deadline) {
            atomic_store(&trip_stop, 1);
            return -1;
        }
    }
    return 0;
}

static void *trip_partner(void *arg) {
    double deadline = *(const double *)arg;
    for (long i = 0; i < TRIP_TURNS; i++) {
        if (trip_wait(2 * i + 1, deadline)) break;
        atomic_store(&trip_turn, 2 * i + 2);
    }
    return NULL;
}

double core_trip_ns(void) {
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2) return -1;
    double t[5];
    for (int r = 0; r < 5; r++) {
        pthread_t th;
        double deadline = clock_wall_s() + TRIP_GIVE_UP_S;
        atomic_store(&trip_turn, 0);
        atomic_store(&trip_stop, 0);
        if (pthread_create(&th, NULL, trip_partner, &deadline)) return -1;
        double t0 = clock_wall_s();
        int gave_up = 0;
        for (long i = 0; i < TRIP_TURNS && !gave_up; i++) {
            atomic_store(&trip_turn, 2 * i + 1);
            gave_up = trip_wait(2 * i + 2, deadline) != 0;
        }
        double t1 = clock_wall_s();
        pthread_join(th, NULL);
        if (gave_up) return -1;
        t[r] = 1e9 * (t1 - t0) / TRIP_TURNS;
        for (int i = r; i > 0 && t[i] < t[i - 1]; i--) {   /* insertion sort */
            double x = t[i];
            t[i] = t[i - 1];
            t[i - 1] = x;
        }
    }
    return t[2];
}

pid_t hog_start(int cpu) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
#ifdef __linux__
        if (cpu >= 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
        }
#endif
        volatile unsigned long x = 0;
        for (;;) x++;   /* CPU-bound until killed */
    }
    if (pid > 0) usleep(300000);   /* let the scheduler place it */
    return pid;
}

#ifdef __linux__
static cpu_set_t cpus_before;   /* busy_cpus_take's, for busy_cpus_give_back */
static int cpus_taken;

int busy_cpus_take(int cpu[2]) {
    if (sched_getaffinity(0, sizeof cpus_before, &cpus_before) != 0 || CPU_COUNT(&cpus_before) < 2) return 0;
    cpu[0] = cpu[1] = -1;
    for (int c = 0; c < CPU_SETSIZE && cpu[1] < 0; c++)   /* the first two it may use */
        if (CPU_ISSET(c, &cpus_before)) cpu[cpu[0] < 0 ? 0 : 1] = c;
    cpu_set_t two;
    CPU_ZERO(&two);
    CPU_SET(cpu[0], &two);
    CPU_SET(cpu[1], &two);
    cpus_taken = sched_setaffinity(0, sizeof two, &two) == 0;
    return cpus_taken;
}

void busy_cpus_give_back(void) {
    if (cpus_taken) sched_setaffinity(0, sizeof cpus_before, &cpus_before);
    cpus_taken = 0;
}
#else
int busy_cpus_take(int cpu[2]) {   /* no way to choose CPUs here (macOS) */
    cpu[0] = cpu[1] = -1;
    return 0;
}

void busy_cpus_give_back(void) {}
#endif

void hog_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}
