/* docs_figures.h - every figure that README prose or a `make demo` recap
 * states about a run, tied to the output line it comes from (the table
 * FIGURES of tests/check_docs.c; how an entry reads is explained there).
 *
 *   {file, words of the file with {} for each figure, kernels, command,
 *    words of the output with {} ({N}: the prose's Nth, {_}: not compared)}
 *
 * kernels: NULL for figures every build prints alike, "avx512" for those
 * of a training run quoted from the AVX-512 build (compared on such a build
 * only, as `<!-- output avx512: ... -->` blocks are). Timings are not here:
 * they change from run to run, and the READMEs give them with the machine
 * and the date they were measured on. */

/* ---- README.md ------------------------------------------------------------------- */
{"README.md", "test BLEU (sacreBLEU 13a) {} greedy and {} with beam search (beam 4, α 0.6) for the last checkpoint, "
              "{} and {} with the last 5 checkpoints averaged",
 "avx512", "11_translation",
 "last checkpoint, greedy {1} ... last checkpoint, beam 4, alpha 0.6 {2} ... average of last 5 checkpoints, greedy {3} "
 "... average of last 5, beam 4, alpha 0.6 {4}"},
{"README.md", "chapter 11 (`--tokens`): {}% padding in random batches, {}% sorted by length", NULL, "11_translation",
 "bucketing by length cuts the padding from {}% to {}%"},
{"README.md", "averaged checkpoint, greedy vs beam search (beam 4, α 0.6, input + 50, tensor2tensor's rules): {} / {} "
              "last, {} / {} averaged",
 "avx512", "11_translation",
 "last checkpoint, greedy {1} ... last checkpoint, beam 4, alpha 0.6 {2} ... average of last 5 checkpoints, greedy {3} "
 "... average of last 5, beam 4, alpha 0.6 {4}"},
{"README.md", "the smoothed loss floor ({} nats for 11 tokens) is printed", NULL, "08_training",
 "lowest possible loss with this smoothing (entropy of one row): {} nats per token"},
{"README.md", "`build/07_transformer --table3`: base {}M (paper 65M), big {}M (paper 213M)", NULL,
 "07_transformer --table3", "base ... {}M ... big ... {}M"},
{"README.md", "chapter 10: counted-FLOP exponents {} (self-attention in n, its projections still counted), {}, {}, {}, "
              "all within 0.25", NULL, "10_why_self_attention",
 "FLOP exponents are within 0.25 of Table 1's: self-attention in n {}, recurrent in n {}, recurrent in d {}, "
 "convolution in d {};"},
{"README.md", "Table 1's terms cross the recurrent layer at n = {}·d", NULL, "10_why_self_attention",
 "FLOPs, Table 1's terms: self-attention becomes costlier at n = {_}, n/d = {}."},
{"README.md", "path lengths {}, {}, {}, {}, {} at n = {}", NULL, "10_why_self_attention",
 "conv dilated restricted log_k n {6} {1} {2} {3} {4} {5}"},

/* ---- chapters/01_dot_product ----------------------------------------------------- */
{"chapters/01_dot_product/README.md", "`std(q.k)` is about `sqrt(d_k)` ({} at the base model's `d_k = 64`, Table 3)", NULL,
 "01_dot_product", "64 {_} 64 {} {_}"},

/* ---- chapters/02_softmax ----------------------------------------------------------- */
{"chapters/02_softmax/README.md", "`softmax([10, 2, 1]) = [{}, {}, {}]`. A plausible-looking guess", NULL,
 "02_softmax", "softmax([10, 2, 1]) = [{}, {}, {}]"},
{"chapters/02_softmax/README.md", "makes the last two {}x and {}x too big: the ratios are `e^-8` and `e^-9`, and the top "
                                  "score takes {}% of the attention",
 NULL, "02_softmax", "makes the last two {}x and {}x too big: ... The top score takes {}% of the attention"},
{"chapters/02_softmax/README.md", "the answer is `[{}, {}, {}]`", NULL, "02_softmax", "stable softmax = [{}, {}, {}]"},
{"chapters/02_softmax/README.md", "(`x - max`, `exp`, the sum {})", NULL, "02_softmax", "sum = {}"},
{"chapters/02_softmax/README.md", "(max w {} -> {}, H {} -> {}, and |J| falls from {} to {}, by d_k = {})", NULL,
 "02_softmax", "raw scaled | raw scaled | raw scaled 1 | {1} {_} | {3} {_} | {5} {_} ... {7} | {2} {_} | {4} {_} | {6} {_} "
               "What to see"},

/* ---- chapters/03_attention ------------------------------------------------------- */
{"chapters/03_attention/README.md", "its brightest cell ({}, the densest shade) under \"book\"", NULL, "03_attention",
 "it {_}. {}% {_}. {_}. {_}. {_}. {_}."},
{"chapters/03_attention/README.md", "exactly `|k_book|^2 = {}`, scaled to {}.", NULL, "03_attention",
 "= {}; / sqrt(d_k) = / 2.0000 -> {}"},

/* ---- chapters/04_multihead ------------------------------------------------------- */
{"chapters/04_multihead/README.md", "\"library mha_forward vs the steps above: max |diff| ... they agree\" (about {}).", NULL,
 "04_multihead", "library mha_forward vs the steps above: max |diff| output {}, weights {_}: they agree"},

/* ---- chapters/05_positional_encoding ---------------------------------------------- */
{"chapters/05_positional_encoding/README.md", "max |PE(pos+k) − M_k PE(pos)| over every position: about {}, which is "
                                              "float32 rounding",
 NULL, "05_positional_encoding", "(pos = 0..127-k) 1 {} 2"},
{"chapters/05_positional_encoding/README.md", "first one with its rows swapped (max difference {}, rounding only)", NULL,
 "05_positional_encoding", "reordered: \"the fish eats the cat\" ... max |out_new[i] - out[perm[i]]| without PE: {} with PE"},

/* ---- chapters/06_masking --------------------------------------------------------- */
{"chapters/06_masking/README.md", "the check line says \"entries not exactly 0.0: {}\"", NULL, "06_masking",
 "entries not exactly 0.0: {} -> all exactly zero"},

{"chapters/06_masking/README.md", "- Section 5: \"max |additive - multiplicative|\" around {}.", NULL, "06_masking",
 "max |additive - multiplicative| over the batch = {} -> the same weights"},

/* ---- chapters/11_translation ----------------------------------------------------- */
{"chapters/11_translation/README.md", "about {}% of a randomly filled batch is padding, {}% of a length-sorted one, so "
                                      "an epoch needs {}x fewer steps",
 NULL, "11_translation", "cuts the padding from {}% to {}%: an epoch takes {}x fewer steps"},
{"chapters/11_translation/README.md", "(*der blaue Maus* for *der blauen Maus*,", "avx512", "11_translation",
 "ref ... Mütter der blauen Maus danken . hyp ... Mütter der blaue Maus danken ."},
{"chapters/11_translation/README.md", "*mit den kleinen Äpfel* for *Äpfeln*)", "avx512", "11_translation",
 "ref ... mit den kleinen Äpfeln gekommen ist . hyp ... mit den kleinen Äpfel gekommen ist ."},
{"chapters/11_translation/README.md", "(*danken den Vogel* for *danken die Vögel dem Vogel*)", "avx512",
 "11_translation", "ref Während die braunen Freunde den Ärzten danken , danken die Vögel dem Vogel . hyp Während die "
                   "braunen Freunde den Ärzten danken , danken den Vogel ."},
{"chapters/11_translation/README.md", "| last checkpoint (step {}), greedy | {} | {}/{}/{}/{} | {} | {} |", "avx512",
 "11_translation", "trained {1} steps ... last checkpoint, greedy {2} {_} {3}/{4}/{5}/{6} {8} {7}"},
{"chapters/11_translation/README.md", "| last checkpoint, beam 4, α 0.6 | {} | {}/{}/{}/{} | {} | {} |", "avx512",
 "11_translation", "last checkpoint, beam 4, alpha 0.6 {1} {_} {2}/{3}/{4}/{5} {7} {6}"},
{"chapters/11_translation/README.md", "| average of the last 5 checkpoints (steps 1300-1500), greedy | {} | {}/{}/{}/{} | {} "
                                      "| {} |",
 "avx512", "11_translation", "average of last 5 checkpoints, greedy {1} {_} {2}/{3}/{4}/{5} {7} {6}"},
{"chapters/11_translation/README.md", "| average of the last 5 checkpoints, beam 4, α 0.6 | {} | {}/{}/{}/{} | {} | {} |",
 "avx512", "11_translation", "average of last 5, beam 4, alpha 0.6 {1} {_} {2}/{3}/{4}/{5} {7} {6}"},
{"chapters/11_translation/README.md", "with the same last loss ({})", "avx512", "11_translation",
 "last loss {}"},
{"chapters/11_translation/README.md", "Beam search changed {} of the {} outputs of the last checkpoint (-{} BLEU: a more "
                                      "probable output is not always closer to the reference); averaging gained {} with "
                                      "greedy decoding",
 "avx512", "11_translation",
 "last: beam lowered BLEU by {3} ({1} of {2} outputs differ from greedy's), ... averaging the last 5 checkpoints raised "
 "greedy BLEU by {4}"},
{"chapters/11_translation/README.md", "decoder layer {} head {} put {} of its cross-attention on *sees* (the mean over all "
                                      "{} heads: {})",
 "avx512", "11_translation",
 "decoder layer {} head {} puts {} of its attention on English \"sees\" (position 9 of 15); mean over all {} heads {}"},
{"chapters/11_translation/README.md", "decoder layer {} head {} put {} of its self-attention on *Frau* (the subject whose "
                                      "number decides *sieht*, not *sehen*; uniform would be {})",
 "avx512", "11_translation",
 "the strongest look back at its subject \"Frau\" is layer {} head {}, weight {} (uniform over the 12 tokens so far: {})"},
{"chapters/11_translation/README.md", "in the encoder, layer {} head {} put {} of the attention of *sees* on *woman*, "
                                      "against {} for uniform attention",
 "avx512", "11_translation",
 "from \"sees\" to its subject \"woman\" the strongest head is layer {} head {}, weight {} (uniform attention over the 15 "
 "source tokens: {})"},
{"chapters/11_translation/README.md", "Peak resident memory stays within 2x of what the model", NULL, "11_translation",
 "peak resident memory (getrusage ru_maxrss) ... what is needed: within 2x"},
{"chapters/11_translation/README.md", "activations sized per dimension would have taken {} MB instead of {})", "avx512",
 "11_translation", "activations and loss gradient as allocated (the largest batch that runs) {2}, ... the activations "
                   "would take {1} MB"},
{"chapters/11_translation/README.md", "{} English and {} German word forms in the default training set", NULL,
 "11_translation", "train words: English {_} ({} distinct), German {_} ({} distinct)"},

/* ---- tools/demo_recaps.txt ------------------------------------------------------- */
{"tools/demo_recaps.txt", "Table 1's terms, n^2 d against n d^2, favour attention for short n;", NULL,
 "10_why_self_attention", "FLOPs, Table 1's terms: self-attention becomes costlier at n ="},
{"tools/demo_recaps.txt", "whole layers do not: 10_why_self_attention | its 4 projections alone cost {}x a recurrent layer",
 NULL, "10_why_self_attention",
 "FLOPs, the whole layers: self-attention is costlier at every n measured ... self-attention's four d x d projections "
 "alone are {_} MFLOP, the whole recurrent layer {_} MFLOP ({}x)"},
{"tools/demo_recaps.txt", "Yet it links any two positions in {} step.", NULL, "10_why_self_attention",
 "Path: self-attention {} layer at every n"},

/* ---- chapters/07_transformer ----------------------------------------------------- */
{"chapters/07_transformer/README.md", "the top guess here gets {} against the uniform 1/12 = {}.", NULL, "07_transformer",
 "next-token guesses: 1. ... p = {} ... the uniform guess would be 1/12 = {})"},
{"chapters/07_transformer/README.md", "(the decoder's second row: {} and {})", NULL, "07_transformer",
 "decoder masked self-attention, layer 1 of 2, head 1 of 4 <s> le chat assis <s> {_}@ {_} {_} {_} le {}+ {}+"},
{"chapters/07_transformer/README.md", "| base | 6 | 512 | 2048 | 8 | 64 | 64 | {}M | 65M | {}M |", NULL, "07_transformer --table3",
 "base 6 512 2048 8 64 64 {}M 65M {}M"},
{"chapters/07_transformer/README.md", "| (B) d_k=16 | 6 | 512 | 2048 | 8 | 16 | 64 | {}M | 58M | {}M |", NULL, "07_transformer --table3",
 "(B) d_k=16 6 512 2048 8 16 64 {}M 58M {}M"},
{"chapters/07_transformer/README.md", "| (B) d_k=32 | 6 | 512 | 2048 | 8 | 32 | 64 | {}M | 60M | {}M |", NULL, "07_transformer --table3",
 "(B) d_k=32 6 512 2048 8 32 64 {}M 60M {}M"},
{"chapters/07_transformer/README.md", "| (C) N=2 | 2 | |  | |  | | {}M | 36M | {}M |", NULL, "07_transformer --table3",
 "(C) N=2 2 512 2048 8 64 64 {}M 36M {}M"},
{"chapters/07_transformer/README.md", "| (C) N=4 | 4 | |  | |  | | {}M | 50M | {}M |", NULL, "07_transformer --table3",
 "(C) N=4 4 512 2048 8 64 64 {}M 50M {}M"},
{"chapters/07_transformer/README.md", "| (C) N=8 | 8 | |  | |  | | {}M | 80M | {}M |", NULL, "07_transformer --table3",
 "(C) N=8 8 512 2048 8 64 64 {}M 80M {}M"},
{"chapters/07_transformer/README.md", "| (C) d_model=256 | 6 | 256 | 2048 | 8 | 32 | 32 | {}M | 28M | {}M |", NULL, "07_transformer --table3",
 "(C) d_model=256 6 256 2048 8 32 32 {}M 28M {}M"},
{"chapters/07_transformer/README.md", "| (C) d_model=1024 | 6 | 1024 | 2048 | 8 | 128 | 128 | {}M | 168M | {}M |", NULL, "07_transformer --table3",
 "(C) d_model=1024 6 1024 2048 8 128 128 {}M 168M {}M"},
{"chapters/07_transformer/README.md", "| (C) d_ff=1024 | 6 | 512 | 1024 | 8 | 64 | 64 | {}M | 53M | {}M |", NULL, "07_transformer --table3",
 "(C) d_ff=1024 6 512 1024 8 64 64 {}M 53M {}M"},
{"chapters/07_transformer/README.md", "| (C) d_ff=4096 | 6 | 512 | 4096 | 8 | 64 | 64 | {}M | 90M | {}M |", NULL, "07_transformer --table3",
 "(C) d_ff=4096 6 512 4096 8 64 64 {}M 90M {}M"},
{"chapters/07_transformer/README.md", "| big | 6 | 1024 | 4096 | 16 | 64 | 64 | {}M | 213M | +{}M |", NULL, "07_transformer --table3",
 "big 6 1024 4096 16 64 64 {}M 213M +{}M"},

/* ---- chapters/08_training -------------------------------------------------------- */
{"chapters/08_training/README.md", "the exact-match accuracy is {}% (100.0% on a CPU without AVX-512", "avx512", "08_training",
 "exact match on 1000 held-out sequences (seed 2017): {}%"},
{"chapters/08_training/README.md", "(rows: the true word; on the fixed 0..1 scale the {} entries are the faintest shade",
 NULL, "08_training", "the other 9 words eps/9 = {} each"},
{"chapters/08_training/README.md", "row to scale), the loss floor {}, and", NULL, "08_training",
 "(entropy of one row): {} nats per token"},
{"chapters/08_training/README.md", "with it, the loss is lowest at probability {} and rises again", NULL, "08_training",
 "with smoothing the loss is lowest when the model gives the right word {}, not 1"},
{"chapters/08_training/README.md", "the encoder's weights span {}..{} around the uniform {}", NULL, "08_training",
 "weights {}..{}, the largest {_}x uniform (1/10 = {})"},
{"chapters/08_training/README.md", "(the default run: {}%, {}% of tokens; final loss {};", "avx512", "08_training",
 "final loss {3} (floor ... exact match on 1000 held-out sequences (seed 2017): {1}% (tokens right: {2}%"},
{"chapters/08_training/README.md", "on a CPU without AVX-512 {}%, {}%, {}).", "avx2", "08_training",
 "final loss {3} (floor ... exact match on 1000 held-out sequences (seed 2017): {1}% (tokens right: {2}%"},

/* ---- chapters/13_data_parallel --------------------------------------------------- */
{"chapters/13_data_parallel/README.md", "Step 1's gradients agree to {} relative", "avx512", "13_data_parallel",
 "step 1's gradients, tree vs one pass: max |diff| / max |grad| = {}"},
{"chapters/13_data_parallel/README.md", "with the default 4 micro-batches nothing else happens in {} steps", NULL,
 "13_data_parallel", "no ReLU input changed sign in {} steps"},
{"chapters/13_data_parallel/README.md", "100,000 steps in 12 hours is {} s per step; the base model's 63,045,632 "
                                        "parameters are {} MB of float32 gradients; a ring allreduce sends 2(P-1)/P of "
                                        "them from each GPU, {} MB per step, so ~{} GB/s per GPU",
 NULL, "13_data_parallel",
 "100,000 steps in 12 hours = {} s per step, ... {_} parameters = {} MB of gradients a step; a ring allreduce sends 2 "
 "(P-1)/P of it from each GPU: {} MB per step, {} GB/s per GPU to keep up"},

/* ---- chapters/12_variations (recorded runs: nothing trains) ---------------------- */
#define CH12 "12_variations --results chapters/12_variations/recorded.tsv"
{"chapters/12_variations/README.md", "(PPL ±{}, BLEU ±{}: h=16's {} against {} is", NULL, CH12 " --all",
 "paper: = within PPL +-{1}, BLEU +-{2} ... | base {4} ... h=16 d_k=32 {3}"},
{"chapters/12_variations/README.md", "the default's 600 steps at {}.", NULL, CH12, "dev BLEU {} (range"},
{"chapters/12_variations/README.md", "With two base seeds the band is PPL ±{} and BLEU ±{}, and every one of the four rows",
 NULL, CH12, "(PPL +-{}, BLEU +-{}),"},
{"chapters/12_variations/README.md", "the perplexity is lower ({}) and the BLEU lower too ({}), the split", NULL, CH12,
 "D eps_ls=0 {} {}"},
{"chapters/12_variations/README.md", "(dev BLEU {} against the base's {})", NULL, CH12,
 "dev BLEU {2} (range ... E learned PE {_} {1}"},
{"chapters/12_variations/README.md", "The paper's direction holds in {} of {} rows for PPL and {} of {} for BLEU, all {} by "
                                     "more than twice the spread.",
 NULL, CH12, "holds in {} of {} converged rows for PPL, {} of {} for BLEU; of these, {} (PPL) and {_} (BLEU)"},
{"chapters/12_variations/README.md", "ends with the base at dev BLEU {} (dev PPL {}): the chapter prints", "avx512",
 "12_variations --rows base,E --seeds 1 --steps 60 --train-size 1000 --dev-size 50",
 "base, 1 seed: dev PPL {2} ... dev BLEU {1} ... too short to compare"},
{"chapters/12_variations/README.md", "a 60-step run (below) ends with the base at dev BLEU {},", "avx512",
 "12_variations --rows base,E --seeds 1 --steps 60 --train-size 1000 --dev-size 50", "dev BLEU {} (range"},
#define CH12_ALL CH12 " --all"
{"chapters/12_variations/README.md", "The three base seeds agree closely (dev BLEU {}..{}; the band is PPL ±{}, BLEU ±{}), "
                                     "and all {} rows converged: the highest dev PPL, twice the layers (2N), is {}, "
                                     "under twice the base's {}. The paper's direction holds in {} of {} rows for PPL "
                                     "and {} of {} for BLEU; of these, {} and {} lie more than twice the band",
 NULL, CH12_ALL,
 "dev BLEU {_} (range {1}..{2}) ... (PPL +-{3}, BLEU +-{4}), ... C 2N {6} {_} ... converged: {5} of {_} rows (dev PPL "
 "at most twice the base's {7}) the paper's direction holds in {8} of {9} converged rows for PPL, {10} of {11} for "
 "BLEU; of these, {12} (PPL) and {13} (BLEU)"},
{"chapters/12_variations/README.md", "halved d_k (dev PPL {}) and P_drop=0.2 ({})", NULL, CH12_ALL,
 "B d_k/2 {} ... D P_drop=0.2 {}"},
{"chapters/12_variations/README.md", "its dev PPL ({}) is clearly better, but its BLEU gain ({} against {})", NULL,
 CH12_ALL, "dev BLEU {3} (range ... C 2d_model {1} {2}"},
{"chapters/12_variations/README.md", "Likewise h=16's higher BLEU ({}) is weak", NULL, CH12_ALL, "A h=16 {_} {}"},
{"chapters/12_variations/README.md", "has the worst PPL of all ({}) where the paper's N=8 has a better one (its BLEU, {},",
 NULL, CH12_ALL, "C 2N {} {}"},
{"chapters/12_variations/README.md", "positional embeddings are worse on both ({}) where", NULL, CH12_ALL,
 "E learned PE {_} {}"},
{"chapters/12_variations/README.md", "ε_ls=0.2 has the higher PPL ({}, as smoothing should) and a BLEU the same as base ({})",
 NULL, CH12_ALL, "D eps_ls=0.2 {} {}"},
{"chapters/12_variations/README.md", "P_drop=0 has a worse PPL ({}) and the same BLEU ({}).", NULL, CH12_ALL,
 "D P_drop=0 {} {}"},
#define CH12_1500 CH12 " --steps 1500 --rows base,B,D --seeds 2"
{"chapters/12_variations/README.md", "the base is near the task's ceiling (dev BLEU {}) and its two seeds agree closely "
                                     "({}..{}; the band is PPL ±{}, BLEU ±{})",
 NULL, CH12_1500, "dev BLEU {1} (range {2}..{3}) ... (PPL +-{4}, BLEU +-{5})"},
{"chapters/12_variations/README.md", "d_k/2 ({}) and P_drop=0.2 ({}) lie far outside", NULL, CH12_1500,
 "B d_k/2 {_} {} ... D P_drop=0.2 {_} {}"},
{"chapters/12_variations/README.md", "ε_ls=0 has the lowest PPL ({}) and ε_ls=0.2 the highest ({})", NULL, CH12_1500,
 "D eps_ls=0 {} ... D eps_ls=0.2 {}"},
{"chapters/12_variations/README.md", "P_drop=0 has a worse PPL ({}) and a BLEU gain ({}) too small", NULL, CH12_1500,
 "D P_drop=0 {} {}"},
{"chapters/12_variations/README.md", "paper's direction holds in {} of {} rows for PPL, all {} clear, and in {} of {} for "
                                     "BLEU",
 NULL, CH12_1500, "holds in {1} of {2} converged rows for PPL, {4} of {5} for BLEU; of these, {3} (PPL)"},
#undef CH12_1500
#undef CH12_ALL
#undef CH12

/* ---- chapters/10_why_self_attention ---------------------------- */
{"chapters/10_why_self_attention/README.md", "`self-attention vs the library's mha_forward: max |difference| {}`", NULL,
 "10_why_self_attention", "self-attention vs the library's mha_forward: max |difference| {}"},
{"chapters/10_why_self_attention/README.md", "(`{} of {} weights > 0`: every query reads every key", NULL,
 "10_why_self_attention", "full self-attention, head 1: {} of {} weights > 0"},
{"chapters/10_why_self_attention/README.md", "the counted FLOP exponents are {} for self-attention (fitted over n = {}..{}, "
                                              "where n²·d is at least {}% of its FLOPs), {} for recurrent; over d, {} for "
                                              "recurrent and for convolution. All four are within {} of Table 1's",
 NULL, "10_why_self_attention",
 "Table 1's term is >= {4}% ... self-attention 2 n={2}..{3} {1} ... FLOP exponents are within {7} of Table 1's: "
 "self-attention in n {_}, recurrent in n {5}, recurrent in d {6}, convolution in d {_};"},
{"chapters/10_why_self_attention/README.md", "Self-attention's {} is not 2 because", NULL, "10_why_self_attention",
 "self-attention in n {},"},
{"chapters/10_why_self_attention/README.md", "(`--n-max 1024` fits over n = {}..{} and gives {})", NULL,
 "10_why_self_attention --n-max 1024", "self-attention 2 n={}..{} {}"},
{"chapters/10_why_self_attention/README.md", "(`Self-attention over n = {}..{}: CPU time grew as n^…, its FLOPs as n^{},",
 NULL, "10_why_self_attention", "Self-attention over n = {}..{}: CPU time grew as n^{_}, its FLOPs as n^{},"},
{"chapters/10_why_self_attention/README.md", "`FLOPs, Table 1's terms: self-attention becomes costlier at n = {}, n/d = {}`",
 NULL, "10_why_self_attention", "FLOPs, Table 1's terms: self-attention becomes costlier at n = {}, n/d = {}."},
{"chapters/10_why_self_attention/README.md", "at n = 16 (k = 3, r = 4): self-attention {}, recurrent {}, contiguous "
                                              "convolution {}, dilated {}, restricted {}",
 NULL, "10_why_self_attention", "log_k n 16 {} {} {} {} {}"},
{"chapters/10_why_self_attention/README.md", "at n = 1024: {}, {}, {}, {}, {}. Contiguous", NULL,
 "10_why_self_attention", "1024 {} {} {} {} {} 6.31"},
{"chapters/10_why_self_attention/README.md", "the score bytes grow as (n ratio)^{} and", NULL, "10_why_self_attention",
 "= (n ratio)^{},"},
{"chapters/10_why_self_attention/README.md", "at d = 512, n = 64 Table 1's term is only {}% and {}% of their FLOPs", NULL,
 "10_why_self_attention",
 "* self-attention: Table 1's term is only {}% of the FLOPs at d = 512; ... * restricted attn: Table 1's term is only {}%"},

/* ---- chapters/09_decoding ------------------------------------------------------- */
{"chapters/09_decoding/README.md", "trains chapter 08's default model (N={}, d_model={}, h={}) for {} steps", NULL,
 "09_decoding", "(N={}, d_model={}, h={}) for {} steps"},
