# style.gp - the look every generated plot script shares.
#
# The programs write self-contained scripts (out/NN_name/*.gp) that carry
# these same lines, so `cd out/NN_name && gnuplot x.gp` needs nothing else.
# Load this file yourself when writing a new script by hand:
#     load '/path/to/plots/style.gp'
#
# pngcairo when this gnuplot has it (anti-aliased), else the libgd png.
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 800,560 noenhanced font 'Sans,10'
} else {
    set terminal png size 800,560 noenhanced
}
# noenhanced: labels such as d_k or x^2 print as written, not as sub/superscripts.
# viridis: ordered light-to-dark, readable in grey scale and for colour-blind
# readers; the terminal heatmaps (common/io/show.c) use the same ramp.
set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 '#fde725')
set grid
