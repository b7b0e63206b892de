# attention-in-c - "Attention Is All You Need", one idea at a time, in C.
#
#   make            build the library and every chapter into build/
#   make run        run every chapter at its defaults (output in out/)
#   make test       build and run the Check test suite
#   make plots      render every plot script in out/ with gnuplot
#   make bench      speed table: matmul vs FMA peak and OpenBLAS, model steps vs PyTorch
#   make cuda-check on a GPU machine: build, validate every kernel, bench, report
#
# Switches (each is `make VAR=1`):
#   NO_OMP=1     build without OpenMP (single thread)
#   SANITIZE=1   AddressSanitizer + UBSan build, in build/sanitize (implies CUDA=0;
#              a BUILD=... on the command line wins)
#   CUDA=0       do not build the CUDA kernels even if nvcc is found
#   BLAS=openblas  send gemm() to OpenBLAS's cblas_sgemm (needs libopenblas-dev)
#   PORTABLE=1   no -march=native (generic x86-64 / other CPUs)

CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
BUILD   ?= build
OUT     ?= out

CFLAGS  = -std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter -D_DEFAULT_SOURCE
CFLAGS += -DPLOTS_DIR='"$(CURDIR)/plots"'
LDLIBS  = -lm

ifneq ($(PORTABLE),1)
CFLAGS += -march=native
endif

ifneq ($(NO_OMP),1)
CFLAGS += -fopenmp
LDLIBS += -fopenmp
endif

ifeq ($(SANITIZE),1)
BUILD   = build/sanitize
CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDLIBS += -fsanitize=address,undefined
CUDA   ?= 0
endif

ifeq ($(BLAS),openblas)
CFLAGS += -DUSE_OPENBLAS $(shell pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread)
LDLIBS += $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
endif

# CUDA builds when nvcc is found, unless CUDA=0
ifeq ($(NVCC),)
CUDA ?= 0
else
CUDA ?= 1
endif
ifeq ($(CUDA),1)
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCCFLAGS   = -O2 -std=c++17 -Xcompiler -Wall,-Wno-unused-parameter -arch=sm_90 -Icommon -Icuda
CFLAGS     += -DUSE_CUDA
LDLIBS     += -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
endif

CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lpthread)

# ---- what gets built ---------------------------------------------------------
LIB_SRC   = $(wildcard common/*.c) $(wildcard cuda/*.c)
LIB_OBJ   = $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
ifeq ($(CUDA),1)
LIB_OBJ  += $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard cuda/*.cu))
endif
LIB       = $(BUILD)/libaiyn.a

CHAPTERS  = $(patsubst chapters/%/main.c,%,$(wildcard chapters/[0-9][0-9]_*/main.c))
PROGRAMS  = $(CHAPTERS:%=$(BUILD)/%)

TEST_SRC  = $(filter-out tests/check_main.c,$(wildcard tests/check_*.c))
SUITES    = $(patsubst tests/check_%.c,%,$(TEST_SRC))
TEST_BIN  = $(BUILD)/check_all

BENCH_BIN = $(BUILD)/bench

# GPU tools (validator + benchmarks, each with its own main): CUDA builds only
ifeq ($(CUDA),1)
CUDA_TOOLS = $(patsubst cuda/tools/%.c,$(BUILD)/%,$(wildcard cuda/tools/*.c))
endif

all: $(LIB) $(PROGRAMS) $(CUDA_TOOLS)

$(BUILD)/obj/%.o: %.c $(wildcard common/*.h cuda/*.h) | dirs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icommon -Icuda -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(wildcard common/*.h cuda/*.h) | dirs
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%: chapters/%/main.c $(LIB)
	$(CC) $(CFLAGS) -Icommon -Icuda $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/%: cuda/tools/%.c $(LIB)
	$(CC) $(CFLAGS) -Icommon -Icuda $< $(LIB) $(LDLIBS) -o $@

dirs:
	@mkdir -p $(BUILD)/obj

# ---- run the chapters -------------------------------------------------------
run: deps-run all
	@for p in $(CHAPTERS); do \
	  echo; echo "################ $$p ################"; \
	  ./$(BUILD)/$$p --out $(OUT)/$$p || exit 1; \
	done
	@echo; echo "All chapters ran. Plots and data are in $(OUT)/ (PNG files need gnuplot)."

# ---- tests ------------------------------------------------------------------
$(BUILD)/suites.h: $(TEST_SRC) | dirs
	@printf '%s\n' $(foreach s,$(SUITES),'SUITE($(s))') > $@

$(TEST_BIN): tests/check_main.c $(TEST_SRC) tests/testutil.h $(BUILD)/suites.h $(LIB)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Icommon -Icuda -Itests -I$(BUILD) \
	    tests/check_main.c $(TEST_SRC) $(LIB) $(CHECK_LIBS) $(LDLIBS) -o $@

test: deps-test $(TEST_BIN) $(PROGRAMS)
	BUILD_DIR=$(BUILD) ./$(TEST_BIN)

# valgrind over the test suite (no fork, so valgrind follows every test) and
# every chapter at its defaults. valgrind cannot decode AVX-512, so this uses
# its own PORTABLE=1 build in build/valgrind.
VG = valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect -q
valgrind:
	$(MAKE) BUILD=build/valgrind PORTABLE=1 CUDA=0 build/valgrind/check_all $(CHAPTERS:%=build/valgrind/%)
	CK_FORK=no BUILD_DIR=build/valgrind $(VG) ./build/valgrind/check_all
	$(foreach p,$(CHAPTERS),$(VG) ./build/valgrind/$(p) --out $(OUT)/valgrind/$(p) $(QUICK_$(p)) >/dev/null &&) true

# chapters that take long at their defaults get a short run under valgrind and sanitizers
QUICK_08_training = --steps 5 --batch 16 --eval 10 --examples 1
QUICK_09_decoding = --train-steps 5 --search 64 --cost-len 16

# every chapter once, the long ones shortened (QUICK_*): what CI runs under SANITIZE=1
smoke: all
	$(foreach p,$(CHAPTERS),./$(BUILD)/$(p) --out $(OUT)/smoke/$(p) $(QUICK_$(p)) >/dev/null &&) true
	@echo "smoke: every chapter ran"

# ---- plots, bench, cuda-check ---------------------------------------------
plots:
	@command -v gnuplot >/dev/null || { echo "gnuplot not found: sudo apt-get install -y gnuplot-nox"; exit 1; }
	@n=0; for gp in $$(find $(OUT) -name '*.gp' 2>/dev/null); do \
	  (cd $$(dirname $$gp) && gnuplot $$(basename $$gp)) && n=$$((n+1)); done; \
	echo "rendered $$n plots under $(OUT)/"

$(BENCH_BIN): $(wildcard bench/*.c bench/*.h) $(LIB)
	$(CC) $(CFLAGS) -DUSE_OPENBLAS_REF -Icommon -Icuda $(wildcard bench/*.c) $(LIB) \
	    $(shell pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas) $(LDLIBS) -o $@

bench: all $(BENCH_BIN)
	./$(BENCH_BIN)

cuda-check:
	bash cuda/cuda_check.sh

deps-run:
	@sh tools/deps.sh run
deps-test:
	@sh tools/deps.sh test

clean:
	rm -rf build $(OUT)

.PHONY: all run test smoke valgrind plots bench cuda-check deps-run deps-test clean dirs
.SECONDARY:
