/* show.c - PLACEHOLDER: being rewritten (shapes, heatmaps, plots). */
#include "show.h"
#include <stdio.h>
#include <unistd.h>
static int color = -1;
void show_set_color(int on) { color = on; }
int show_color(void) { if (color < 0) color = isatty(1); return color; }
void show_section(const char *title) { printf("\n== %s ==\n", title); }
void show_shape(const Tensor *t, const char *note) { char b[256]; printf("  %s%s%s\n", tensor_shape_str(t, b, sizeof b), note ? "  " : "", note ? note : ""); }
void show_matrix(const char *title, const float *x, int rows, int cols, const char *const *rl, const char *const *cl) { (void)rl; (void)cl; printf("%s\n", title); for (int i = 0; i < rows; i++) { for (int j = 0; j < cols; j++) printf(" %8.4f", x[i * cols + j]); printf("\n"); } }
void show_vector(const char *name, const float *x, int n) { printf("%s = [", name); for (int i = 0; i < n; i++) printf("%s%.4f", i ? ", " : "", x[i]); printf("]\n"); }
void show_heatmap(const char *title, const float *x, int rows, int cols, const char *const *rl, const char *const *cl) { show_matrix(title, x, rows, cols, rl, cl); }
int plot_mkdir(const char *dir) { (void)dir; return 0; }
void plot_heatmap(const char *dir, const char *name, const char *title, const float *x, int rows, int cols, const char *const *rl, const char *const *cl, const char *xl, const char *yl) { (void)dir; (void)name; (void)title; (void)x; (void)rows; (void)cols; (void)rl; (void)cl; (void)xl; (void)yl; }
void plot_lines(const char *dir, const char *name, const char *title, const char *xl, const char *yl, const float *x, int n, const float *const *s, const char *const *sn, int ns, int lx, int ly) { (void)dir; (void)name; (void)title; (void)xl; (void)yl; (void)x; (void)n; (void)s; (void)sn; (void)ns; (void)lx; (void)ly; }
int plot_render(const char *dir, const char *name) { (void)dir; (void)name; return 0; }
