# attention-in-c - "Attention Is All You Need", one idea at a time, in C.
#
#   make            build the library and every chapter into build/
#   make run        run every chapter at its defaults (output in out/)
#   make test       build and run the Check test suite (then one line: what it skipped, and why)
#   make test-slow  the tests too slow for make test: chapter 11 at its defaults (CI runs it)
#   make smoke      every chapter once, the long ones with their own --quick
#   make valgrind   the test suite and every chapter (--quick) under valgrind
#   make config     look again for what the machine has (after installing Open MPI,
#                   nvcc or OpenBLAS): make looks once per build folder
#   make plots      render every plot script in out/ with gnuplot
#   make demo       lecture mode: every chapter with --pause, a recap after each
#   make bench      speed table: matmul vs FMA peak and OpenBLAS, model steps vs PyTorch
#   make cuda-check on a GPU machine: build, validate every kernel, bench, report
#   make bench-translate  chapter 11 beside a PyTorch model on real German (the
#                   Ding corpus), 3 seeds each: perplexity, BLEU, time (minutes)
#   make parity     every logit, loss, gradient and an Adam step against PyTorch
#                   (installs python3-torch/numpy; tools/parity/)
#   make parity-lm  the 2026 ops (RMSNorm, RoPE, SwiGLU, GQA, mixture of experts)
#                   against PyTorch's basic ops (tools/parity/lm_ops.py)
#   make test-arm64 the tests cross-built for arm64 (Apple Silicon's instruction
#                   set) and run under qemu-user; installs gcc-aarch64-linux-gnu,
#                   qemu-user, check:arm64 (tools/test-arm64.sh)
#   make fuzz       libFuzzer on the checkpoint loader and the Q/K/V parser
#                   (needs clang; FUZZ_SECONDS=60 per target)
#   make sacrebleu  build/venv with sacrebleu, the reference the BLEU test compares with
#
# Switches (each is `make VAR=1`):
#   NO_OMP=1     build without OpenMP (the thread pool is POSIX threads; one thread
#              unless OMP_NUM_THREADS or a program's --threads asks for more)
#   SANITIZE=1   AddressSanitizer + UBSan build, in build/sanitize (implies CUDA=0;
#              a BUILD=... on the command line wins)
#   CUDA=0       do not build the CUDA backend even if nvcc is found
#   CUDA_ARCH=native  build the kernels for the GPU in this machine only
#              (default: sm_75 sm_80 sm_86 sm_89 sm_90 + PTX for newer GPUs)
#   BLAS=openblas  send gemm() to OpenBLAS's cblas_sgemm (needs libopenblas-dev)
#   PORTABLE=1   no -march=native (generic x86-64 / other CPUs)
#   DEMO_QUICK=1 make demo with the long chapters shortened (each chapter's
#              --quick, as make smoke runs them): CI's lecture-mode check
#   SKIP_SLOW=1  make test without running the chapters that train for a while
#              (SLOW_CHAPTERS) for the README checks; SANITIZE=1 implies it
#   MPI=0        do not build the MPI path even if mpicc is found (chapter 13
#              and 08 then run as one process; Debian: openmpi-bin libopenmpi-dev)

.DEFAULT_GOAL := all
CC      ?= gcc
BUILD   ?= build
OUT     ?= out
ifeq ($(SANITIZE),1)
BUILD   = build/sanitize
endif

# ---- what this machine has, found once -----------------------------------------
# The compiler's version and OpenMP, nvcc and a GPU, mpicc and OpenBLAS:
# asked once per build folder and compiler, by the recipe below, and
# kept in $(BUILD)/config_probes.mk, which every later make reads instead of
# asking again. `make config` asks again. A variable given on the command
# line wins over what was found (GPU_SEEN= pretends there is no GPU).
PROBES = $(BUILD)/config_probes.mk
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(PROBES)
endif
ifneq ($(PROBED_CC),$(CC))
$(PROBES): FORCE
endif
$(PROBES):
	@mkdir -p $(BUILD)
	@{ echo 'PROBED_CC := $(CC)'; \
	  echo "CC_VERSION := $$($(CC) --version 2>/dev/null | head -n 1)"; \
	  printf 'int main(void){return 0;}\n' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 'OMP_OK := 1'; \
	  echo "NVCC_FOUND := $$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)"; \
	  { ls /dev/nvidia[0-9]* || nvidia-smi -L | grep -q '^GPU'; } >/dev/null 2>&1 && echo 'GPU_SEEN := 1'; \
	  m=$$(command -v mpicc 2>/dev/null); echo "MPICC_FOUND := $$m"; \
	  [ -n "$$m" ] && echo "MPI_LIBS_FOUND := $$($$m --showme:link 2>/dev/null)"; \
	  pkg-config --exists openblas 2>/dev/null && echo 'HAVE_OPENBLAS := 1'; \
	  echo "OPENBLAS_CFLAGS := $$(pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread)"; \
	  echo "OPENBLAS_LIBS := $$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)"; \
	  true; } > $@.new$$$$ && mv -f $@.new$$$$ $@

# look again now (after installing Open MPI, nvcc or OpenBLAS) and show what was found
config:
	@rm -f $(PROBES)
	@$(MAKE) --no-print-directory $(PROBES) >/dev/null
	@cat $(PROBES)

NVCC    ?= $(NVCC_FOUND)

# -ffp-contract=off: a*b+c stays two roundings, as the plain twins and the
# README quotes expect (GCC's default under -std=c11; clang fuses by default)
CFLAGS  = -std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration -D_DEFAULT_SOURCE
CFLAGS += -ffp-contract=off
CFLAGS += -DPLOTS_DIR='"$(CURDIR)/plots"'
# -lz: zlib reads the dictd text chapter 14 learns from (common/text/lmtext.c)
LDLIBS  = -lm -ldl -lz

ifneq ($(PORTABLE),1)
CFLAGS += -march=native
endif

# OpenMP when the compiler has it (Apple's clang has not without Homebrew's
# libomp): otherwise the build goes on with NO_OMP=1 and says so
ifneq ($(NO_OMP),1)
ifneq ($(OMP_OK),1)
NO_OMP := 1
OMP_WHY := $(CC) -fopenmp fails
endif
endif
ifneq ($(NO_OMP),1)
CFLAGS += -fopenmp
LDLIBS += -fopenmp
else
CFLAGS += -pthread
LDLIBS += -pthread
endif

ifeq ($(SANITIZE),1)
CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDLIBS += -fsanitize=address,undefined
CUDA   ?= 0
endif

ifeq ($(BLAS),openblas)
CFLAGS += -DUSE_OPENBLAS $(OPENBLAS_CFLAGS)
LDLIBS += $(OPENBLAS_LIBS)
endif

# CUDA builds when nvcc is found AND a GPU is visible (a /dev/nvidiaN, or
# nvidia-smi lists one), or when asked: `make cuda` (CUDA=1). Without a GPU,
# compiling the kernels for five GPU generations took 63 of make's 80 s on
# a machine where nothing can run them. CUDA=0: never.
ifeq ($(NVCC),)
CUDA ?= 0
else ifeq ($(GPU_SEEN),1)
CUDA ?= 1
else
CUDA ?= 0
endif
# The CUDA backend is a shared object, build/libaiyn_cuda.so, that programs
# dlopen() only when --device cuda asks: nothing here links cudart or cuBLAS
# into the programs, so a CPU run never loads them.
# Fat binary: machine code for each common GPU generation (Turing sm_75,
# A100 sm_80, RTX 30 sm_86, RTX 40 / L4 sm_89, H100 sm_90) plus PTX of
# compute_90 that the driver compiles for anything newer (Blackwell...).
# CUDA 13's nvcc no longer accepts sm_70 (Volta), so it is not in the list.
CUDA_ARCH ?= 75 80 86 89 90
ifeq ($(CUDA_ARCH),native)
GENCODE = -arch=native
else
GENCODE = $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
          -gencode arch=compute_$(lastword $(CUDA_ARCH)),code=compute_$(lastword $(CUDA_ARCH))
endif
ifeq ($(CUDA),1)
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCCFLAGS   = -O2 -std=c++17 -Xcompiler -Wall,-Wno-unused-parameter,-fPIC $(GENCODE) -Icommon -Icuda
CUDA_LIBS   = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
endif

# MPI (common/dist/dist.c, chapter 13) builds when mpicc is found, unless MPI=0.
# Only dist.c is compiled by mpicc; only the programs that include dist.h
# (and the test runner) link libmpi, so nothing else needs Open MPI.
MPICC ?= $(MPICC_FOUND)
ifeq ($(MPICC),)
MPI ?= 0
else
MPI ?= 1
endif
ifeq ($(MPI),1)
MPI_LIBS = $(MPI_LIBS_FOUND)
endif
# the chapters that include dist/dist.h
MPI_PROGRAMS = $(BUILD)/08_training $(BUILD)/11_translation $(BUILD)/13_data_parallel


# ---- what this build found, make's first line ---------------------------------
#   make: build/  ✓ OpenMP  ✗ CUDA (no GPU seen: make cuda builds it)  ✓ MPI  ...
# and the compiler lines hidden unless V=1 (each step prints one short line)
found  = $(if $(filter 1,$(1)),✓,✗) $(2)$(if $(3), ($(3)))
ifeq ($(MAKELEVEL)$(PROBED_CC),0$(CC))
ifeq ($(filter clean config,$(MAKECMDGOALS)),)
$(info make: $(BUILD)/  $(call found,$(if $(filter 1,$(NO_OMP)),0,1),OpenMP,$(or $(OMP_WHY),$(if $(filter \
  1,$(NO_OMP)),NO_OMP=1)))  $(call \
  found,$(CUDA),CUDA,$(if $(filter 1,$(CUDA)),,$(if $(filter command line,$(origin CUDA)),CUDA=0,$(if \
  $(NVCC),$(if $(GPU_SEEN),CUDA=0,no GPU seen: make cuda builds it),no nvcc))))  $(call found,$(MPI),MPI,$(if $(MPICC),$(if $(filter 1,$(MPI)),,MPI=0),no \
  mpicc))  $(call found,$(if $(HAVE_OPENBLAS),1,0),OpenBLAS,for make bench$(if $(HAVE_OPENBLAS),,: libopenblas-dev))\
  $(if $(filter 1,$(V)),,  (V=1: compiler lines)))
endif
endif
ifeq ($(V),1)
Q   :=
SAY := @:
else
Q   := @
SAY := @printf '  %-6s %s\n'
endif

# ---- the build's settings, recorded ------------------------------------------
# Each group of settings is written to a file in $(BUILD) that changes only
# when the settings do, and what they affect depends on that file: switch
# PORTABLE, SANITIZE, BLAS or NO_OMP (or install Open MPI, nvcc or OpenBLAS
# and run make config), and a plain `make` rebuilds what changed instead of
# saying nothing to do.
#   config_c.txt      compiler, CFLAGS, LDLIBS: every object and program
#   config_mpi.txt    MPI on or off, mpicc's link line: dist.o, the MPI programs
#   config_cuda.txt   nvcc, its flags, NCCL: the CUDA backend
#   config_bench.txt  OpenBLAS found or not: build/bench's OpenBLAS columns
# (`:=`: each is read here, once, so a target's own additions, such as the MPI
# programs' LDLIBS, do not make the recorded settings differ between targets)
BENCH_BLAS     = $(if $(HAVE_OPENBLAS),-DUSE_OPENBLAS_REF $(OPENBLAS_CFLAGS) $(OPENBLAS_LIBS))
CONFIG_c     := $(CC_VERSION) | $(CC) $(CFLAGS) | $(LDLIBS)
CONFIG_mpi   := MPI=$(MPI) $(MPICC) $(MPI_LIBS)
CONFIG_cuda  := CUDA=$(CUDA) $(NVCC) $(NVCCFLAGS) $(CUDA_LIBS) NCCL=$(NCCL) $(NCCL_LIBS)
CONFIG_bench := $(BENCH_BLAS)
STAMP        = $(BUILD)/config

# The new text goes to a name of this recipe's own (its shell's process id),
# so that two makes in one build folder at once (CI runs make test beside
# make run) never take each other's file; rename is atomic, so the stamp is
# whole. (quoted: the text in single quotes, each ' in it as '\'')
quoted = '$(subst ','\'',$(1))'
$(STAMP)_%.txt: FORCE | dirs
	@new=$@.new$$$$; printf '%s\n' $(call quoted,$(CONFIG_$*)) > $$new; \
	if cmp -s $$new $@; then rm -f $$new; else \
	  [ -f $@ ] && echo "make: the $* settings changed since the last build in $(BUILD): rebuilding what they affect"; \
	  mv -f $$new $@; fi
FORCE:

# ---- what gets built ---------------------------------------------------------
# common/ in layers, each folder using only the ones above it in this list:
# core (tensor, rng, errors, files), ref (the plain ops), fast (gemm, SIMD,
# threads: the tuned twins), layers, model, text, io, dist, task
LIB_SRC   = $(wildcard common/*/*.c)
HEADERS   = $(wildcard common/*/*.h cuda/*.h chapters/*/*.h tools/parity/*.h)
LIB_OBJ   = $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB       = $(BUILD)/libaiyn.a
# the same library compiled position-independent, inside each backend .so
PIC_OBJ   = $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
# The host shim (cuda/host_shim.c): the CUDA backend's table with every
# kernel done by its CPU function; built everywhere, for the tests.
SHIM_SO   = $(BUILD)/libaiyn_cuda_shim.so
ifeq ($(CUDA),1)
CUDA_SO   = $(BUILD)/libaiyn_cuda.so
CUDA_OBJ  = $(patsubst %.cu,$(BUILD)/pic/%.o,$(wildcard cuda/*.cu)) \
            $(BUILD)/pic/cuda/backend_cuda.o $(BUILD)/pic/cuda/selftest.o
endif

# NCCL (cuda/nccl.c: gradient sums GPU to GPU, chapter 13) goes into the
# CUDA backend's .so when nccl.h and libnccl are found (NCCL=0: never; pip's
# nvidia-nccl wheel or Debian's libnccl-dev provide them). No program links
# it: dist.c finds it through backend_cuda_symbol, else sums via the host.
ifeq ($(CUDA),1)
NCCL_INC ?= $(firstword $(foreach d,$(CUDA_HOME)/include /usr/local/include /usr/include,$(if $(wildcard $(d)/nccl.h),$(d))))
NCCL_LIB ?= $(firstword $(foreach d,$(CUDA_HOME)/lib64 $(CUDA_HOME)/lib /usr/local/lib /usr/lib/x86_64-linux-gnu,$(if $(wildcard $(d)/libnccl.so),$(d))))
ifneq ($(and $(NCCL_INC),$(NCCL_LIB)),)
NCCL ?= 1
endif
endif
NCCL ?= 0
ifeq ($(NCCL),1)
CUDA_OBJ  += $(BUILD)/pic/cuda/nccl.o
NCCL_LIBS  = -L$(NCCL_LIB) -Wl,-rpath,$(NCCL_LIB) -lnccl
endif

CHAPTERS  = $(patsubst chapters/%/main.c,%,$(wildcard chapters/[0-9][0-9]_*/main.c))
PROGRAMS  = $(CHAPTERS:%=$(BUILD)/%)

TEST_SRC  = $(filter-out tests/check_main.c,$(wildcard tests/check_*.c))
SUITES    = $(patsubst tests/check_%.c,%,$(TEST_SRC))
TEST_BIN  = $(BUILD)/check_all
# chapter-private code (chapters/NN_name/*.c besides main.c), which tests read too
CHAPTER_SRC = $(filter-out %/main.c,$(wildcard chapters/*/*.c))
# tools/parity's C side (gradient and Adam dumps, safetensors exports), outside
# the library: linked by the programs that write those files and by the tests
PARITY_SRC = tools/parity/grad_dump.c
# build/parity_dump: chapter 07's model checked against other implementations
# (dumps and exports from a checkpoint; make parity, the tests)
TOOLS     = $(BUILD)/parity_dump

BENCH_BIN = $(BUILD)/bench

# GPU tools (validator + benchmarks, each with its own main): CUDA builds only
ifeq ($(CUDA),1)
CUDA_TOOLS = $(patsubst cuda/tools/%.c,$(BUILD)/%,$(wildcard cuda/tools/*.c))
endif

all: $(LIB) $(PROGRAMS) $(TOOLS) $(SHIM_SO) $(CUDA_SO) $(CUDA_TOOLS)

$(BUILD)/obj/%.o: %.c $(HEADERS) $(STAMP)_c.txt | dirs
	@mkdir -p $(dir $@)
	$(SAY) CC $<
	$(Q)$(CC) $(CFLAGS) -Icommon -Icuda -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(HEADERS) $(STAMP)_cuda.txt | dirs
	@mkdir -p $(dir $@)
	$(SAY) NVCC $<
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/pic/%.o: %.c $(HEADERS) $(STAMP)_c.txt | dirs
	@mkdir -p $(dir $@)
	$(SAY) CC-PIC $<
	$(Q)$(CC) $(CFLAGS) -fPIC -Icommon -Icuda -c $< -o $@

$(BUILD)/pic/%.o: %.cu $(HEADERS) $(STAMP)_cuda.txt | dirs
	@mkdir -p $(dir $@)
	$(SAY) NVCC $<
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@

# the one file that talks to MPI, compiled by mpicc when there is one
ifeq ($(MPI),1)
$(BUILD)/obj/common/dist/dist.o: common/dist/dist.c $(HEADERS) $(STAMP)_c.txt $(STAMP)_mpi.txt | dirs
	@mkdir -p $(dir $@)
	$(SAY) MPICC $<
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS) -DAIYN_MPI -Icommon -Icuda -c $< -o $@
$(MPI_PROGRAMS): LDLIBS += $(MPI_LIBS)
endif
$(BUILD)/obj/common/dist/dist.o $(MPI_PROGRAMS): $(STAMP)_mpi.txt

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(SAY) AR $@
	$(Q)ar rcs $@ $(filter %.o,$^)

$(SHIM_SO): $(BUILD)/pic/cuda/backend_cuda.o $(BUILD)/pic/cuda/host_shim.o $(PIC_OBJ) $(STAMP)_c.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -shared $(filter %.o,$^) $(LDLIBS) -o $@

$(CUDA_SO): $(CUDA_OBJ) $(PIC_OBJ) $(STAMP)_c.txt $(STAMP)_cuda.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -shared $(filter %.o,$^) $(CUDA_LIBS) $(NCCL_LIBS) $(LDLIBS) -o $@

ifeq ($(NCCL),1)
$(BUILD)/pic/cuda/nccl.o: cuda/nccl.c $(STAMP)_c.txt $(STAMP)_cuda.txt | dirs
	@mkdir -p $(dir $@)
	$(SAY) CC-PIC $<
	$(Q)$(CC) $(CFLAGS) -fPIC -I$(CUDA_HOME)/include -I$(NCCL_INC) -c $< -o $@
endif

# a chapter is its folder's .c files (main.c and any code only it uses) + the library
.SECONDEXPANSION:
$(BUILD)/%: chapters/%/main.c $$(wildcard chapters/%/*.c chapters/%/*.h) $(LIB) $(STAMP)_c.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -Icommon -Icuda -Itools $(filter %.c,$^) $(LIB) $(LDLIBS) -o $@
$(BUILD)/08_training: $(PARITY_SRC)

$(BUILD)/parity_dump: tools/parity/parity_dump.c $(PARITY_SRC) $(LIB) $(STAMP)_c.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -Icommon -Icuda -Itools $(filter %.c,$^) $(LIB) $(LDLIBS) -o $@

# the GPU tools call kernels directly: they link the CUDA backend's .so
$(BUILD)/%: cuda/tools/%.c $(LIB) $(CUDA_SO) $(STAMP)_c.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -Icommon -Icuda $< $(LIB) -L$(BUILD) -laiyn_cuda -Wl,-rpath,'$$ORIGIN' $(LDLIBS) -o $@

dirs:
	@mkdir -p $(BUILD)/obj

# ---- run the chapters -------------------------------------------------------
# every chapter at its defaults (chapter 12's default trains 6 of Table 3's
# models in 2-3 minutes; `build/12_variations --all` trains every row)
run: deps-run all
	@for p in $(CHAPTERS); do \
	  echo; echo "################ $$p ################"; \
	  ./$(BUILD)/$$p --out $(OUT)/$$p || exit 1; \
	done
	@echo; echo "All chapters ran. Plots and data are in $(OUT)/ (PNG files need gnuplot)."

# lecture mode: each chapter waits for Enter before each section (on a
# terminal; `make demo </dev/null` runs straight through), then a recap.
# DEMO_QUICK=1: the long chapters (08-13) run with their --quick, as make
# smoke runs them (CI: make run has just run them at their defaults)
demo: all
	@DEMO_QUICK=$(DEMO_QUICK) sh tools/demo.sh $(BUILD) $(OUT)/demo

# ---- tests ------------------------------------------------------------------
$(BUILD)/suites.h: $(TEST_SRC) | dirs
	@printf '%s\n' $(foreach s,$(SUITES),'SUITE($(s))') > $@

# Check's flags, asked only when the runner is linked: `make test` installs
# Check (tools/deps.sh) just before, on a fresh machine
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lpthread)

# bench/figures.c: the bench's printed ratios, tested by check_bench.c (no timing)
$(TEST_BIN): tests/check_main.c tests/testutil.c $(TEST_SRC) $(CHAPTER_SRC) $(PARITY_SRC) bench/figures.c bench/figures.h \
             $(wildcard tests/*.h) $(BUILD)/suites.h $(LIB) $(STAMP)_c.txt $(STAMP)_mpi.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Icommon -Icuda -Ichapters -Itools -Itests -I$(BUILD) \
	    tests/check_main.c tests/testutil.c $(TEST_SRC) $(CHAPTER_SRC) $(PARITY_SRC) bench/figures.c $(LIB) $(CHECK_LIBS) $(LDLIBS) $(MPI_LIBS) -o $@

# tests/check_docs.c runs the chapters the READMEs quote (and every chapter
# for the width and height checks); under SANITIZE=1 and valgrind it leaves
# out the ones that train for a while (minutes under ASan; the plain `make
# test` runs them, and `make smoke` runs them short under the sanitizers).
# 12_variations trains 6 models at its defaults (2-3 minutes): check_docs.c
# runs it, and its `--all`, on the recorded results of such runs (nothing
# trains), and check_variations.c trains it on a tiny budget
SLOW_CHAPTERS = 08_training 09_decoding 11_translation 12_variations 13_data_parallel
ifeq ($(SANITIZE),1)
SKIP_SLOW ?= 1
endif
DOCS_SKIP ?= $(if $(filter 1,$(SKIP_SLOW)),$(SLOW_CHAPTERS))
# Check's per-case timeouts stop a hang; on a shared machine (CI, two busy
# loops beside it, one core) a case may take several times its idle time, so
# they are stretched 5x unless CK_TIMEOUT_MULTIPLIER says otherwise. No test
# judges by how long something took.
test: deps-test $(TEST_BIN) $(PROGRAMS) $(TOOLS) $(SHIM_SO) $(CUDA_SO)
	BUILD_DIR=$(BUILD) DOCS_SKIP="$(DOCS_SKIP)" CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-5} ./$(TEST_BIN)

# the test case "Slow" (AIYN_SLOW_TESTS=1 adds it): chapter 11 at its
# defaults, BLEU >= 80 (a minute or two); CI runs it
test-slow: deps-test $(TEST_BIN) $(PROGRAMS)
	BUILD_DIR=$(BUILD) AIYN_SLOW_TESTS=1 CK_RUN_CASE=Slow CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-5} ./$(TEST_BIN)

# valgrind over the test suite (no fork, so valgrind follows every test) and
# every chapter, the long ones with their --quick. valgrind cannot decode
# AVX-512, so this uses its own PORTABLE=1 build in build/valgrind.
VG = valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q
valgrind:
	$(MAKE) BUILD=build/valgrind PORTABLE=1 CUDA=0 build/valgrind/check_all build/valgrind/libaiyn_cuda_shim.so $(CHAPTERS:%=build/valgrind/%)
	CK_FORK=no BUILD_DIR=build/valgrind DOCS_SKIP="$(SLOW_CHAPTERS)" $(VG) ./build/valgrind/check_all
	@for p in $(CHAPTERS); do q=$(call quick_of,./build/valgrind/$$p); echo "  VG     $$p $$q"; \
	  $(VG) ./build/valgrind/$$p --out $(OUT)/valgrind/$$p $$q >/dev/null || exit 1; done

# arm64: cross-built with Debian's gcc-aarch64-linux-gnu into build/arm64 and run
# under qemu-user: the plain-C branches of common/fast/ (no AVX there)
test-arm64:
	sh tools/test-arm64.sh

# --quick for a program whose --help lists it (the chapters that take long
# at their defaults: their own short run), else nothing; in a recipe's shell
quick_of = $$($(1) --help | grep -q -- '--quick' && echo --quick)

# every chapter once, the long ones with their --quick: what CI runs under SANITIZE=1
smoke: all
	@for p in $(CHAPTERS); do q=$(call quick_of,./$(BUILD)/$$p); echo "  RUN    $$p $$q"; \
	  ./$(BUILD)/$$p --out $(OUT)/smoke/$$p $$q >/dev/null || exit 1; done
	@echo "smoke: every chapter ran"

# ---- plots, bench, cuda-check ---------------------------------------------
plots:
	@command -v gnuplot >/dev/null || { echo "gnuplot not found: sudo apt-get install -y gnuplot-nox"; exit 1; }
	@n=0; for gp in $$(find $(OUT) -name '*.gp' 2>/dev/null); do \
	  (cd $$(dirname $$gp) && gnuplot $$(basename $$gp)) && n=$$((n+1)); done; \
	echo "rendered $$n plots under $(OUT)/"

# OpenBLAS (libopenblas-dev) is the bench's reference for gemm; `make bench`
# installs it where it may, else builds the bench without its columns and the
# bench says so
$(BENCH_BIN): $(wildcard bench/*.c bench/*.h) $(LIB) $(STAMP)_c.txt $(STAMP)_bench.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -Icommon -Icuda $(wildcard bench/*.c) $(LIB) $(BENCH_BLAS) $(LDLIBS) -o $@

bench: all
	@pkg-config --exists openblas 2>/dev/null || { sh tools/deps.sh install bench libopenblas-dev && rm -f $(PROBES); } || \
	  echo "bench: runs without its OpenBLAS columns"
	@$(MAKE) --no-print-directory $(BENCH_BIN)
	./$(BENCH_BIN)

# chapter 11 against an independent PyTorch model on the same data (BT_FLAGS:
# e.g. --seeds 1 --steps 300 for a short look)
bench-translate: deps-run all
	sh bench/translate.sh $(BUILD) $(BT_FLAGS)

# the CUDA backend on a machine without a GPU (CI: so it cannot rot)
cuda:
	@[ -n "$(NVCC)" ] || { echo "make cuda: nvcc not found (the CUDA toolkit: apt-get install -y nvidia-cuda-toolkit)"; exit 1; }
	@$(MAKE) --no-print-directory CUDA=1 all

cuda-check:
	bash cuda/cuda_check.sh

# the C model against a PyTorch one written from the paper (tools/parity/run.sh)
parity: all
	sh tools/parity/run.sh $(BUILD)

# the 2026 ops of ref/lm_ops.h and layers/lm_ffn.h: lm_ops_dump writes each
# op's inputs, outputs and gradients, lm_ops.py recomputes them in PyTorch
$(BUILD)/lm_ops_dump: tools/parity/lm_ops_dump.c $(LIB) $(STAMP)_c.txt
	$(SAY) LINK $@
	$(Q)$(CC) $(CFLAGS) -Icommon $< $(LIB) $(LDLIBS) -o $@
parity-lm: $(BUILD)/lm_ops_dump
	@/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || sh tools/deps.sh install parity-lm python3-torch python3-numpy
	./$(BUILD)/lm_ops_dump $(BUILD)/parity-lm.safetensors
	/usr/bin/python3 tools/parity/lm_ops.py $(BUILD)/parity-lm.safetensors

# two libFuzzer targets (tests/fuzz/), FUZZ_SECONDS each; prints executions
# and findings, exit 1 on a finding
FUZZ_SECONDS ?= 60
fuzz: all
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh

# sacrebleu for tests/check_bleu.c (skipped, with a message, without it)
sacrebleu: build/venv/bin/python3
build/venv/bin/python3:
	python3 -m venv build/venv && build/venv/bin/pip install -q sacrebleu

deps-run:
	@sh tools/deps.sh run
deps-test:
	@sh tools/deps.sh test

clean:
	rm -rf build $(OUT)

.PHONY: all config run demo test test-slow test-arm64 smoke valgrind plots bench bench-translate cuda cuda-check parity parity-lm fuzz sacrebleu deps-run deps-test clean dirs FORCE
.SECONDARY:
