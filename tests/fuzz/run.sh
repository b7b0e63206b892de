#!/bin/sh
# tests/fuzz/run.sh - `make fuzz`: builds the two libFuzzer targets with
# clang (-fsanitize=fuzzer,address,undefined), seeds them with real files,
# runs each for FUZZ_SECONDS (default 60) and prints executions and
# findings. Findings (inputs that crashed) go to build/fuzz/findings/.
# Exit status 1 if anything was found.
set -u
SECONDS_EACH=${FUZZ_SECONDS:-60}
CLANG=${FUZZ_CC:-clang}
B=build/fuzz
command -v "$CLANG" >/dev/null || { echo "make fuzz needs clang with libFuzzer (apt-get install -y clang)"; exit 1; }
mkdir -p $B/obj $B/findings $B/corpus_checkpoint $B/corpus_qkv $B/seeds_checkpoint $B/seeds_qkv
FLAGS="-std=c11 -g -O1 -D_DEFAULT_SOURCE -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Icommon -Icuda -Ichapters"
objs=""
for src in common/*/*.c chapters/03_attention/qkv_file.c cuda/*.c; do
    o=$B/obj/$(echo "$src" | tr / _).o
    if [ ! -e "$o" ] || [ "$src" -nt "$o" ]; then
        $CLANG $FLAGS -c "$src" -o "$o" 2>>$B/build.log || { echo "fuzz: compiling $src failed (see $B/build.log)"; exit 1; }
    fi
    objs="$objs $o"
done
for t in checkpoint qkv; do
    $CLANG $FLAGS -fsanitize=fuzzer tests/fuzz/fuzz_$t.c $objs -lm -o $B/fuzz_$t 2>>$B/build.log \
        || { echo "fuzz: linking fuzz_$t failed (see $B/build.log)"; exit 1; }
done

# seeds: real files of each kind, so the fuzzer starts from valid inputs
cp chapters/03_attention/example.qkv $B/seeds_qkv/example.qkv
if [ -x build/07_transformer ] && [ -x build/08_training ]; then
    build/07_transformer --layers 1 --d-model 4 --d-ff 4 --heads 1 --vocab 4 --max-len 8 --src "1 2" --tgt "1" \
        --save $B/seeds_checkpoint/weights.ckpt --out $B/seed_out >/dev/null 2>&1
    build/08_training --layers 1 --d-model 4 --d-ff 4 --heads 1 --steps 1 --batch 1 --eval 0 --examples 0 \
        --checkpoint $B/seeds_checkpoint/train.ckpt --out $B/seed_out >/dev/null 2>&1
else
    echo "fuzz: build/07_transformer and build/08_training not built (make): checkpoint fuzzing starts without seeds"
fi

status=0
for t in checkpoint qkv; do
    log=$B/fuzz_$t.log
    before=$(ls $B/findings | wc -l)
    $B/fuzz_$t -max_total_time="$SECONDS_EACH" -print_final_stats=1 -rss_limit_mb=4096 -timeout=10 \
        -artifact_prefix=$B/findings/$t- $B/corpus_$t $B/seeds_$t >$log 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' $log | tail -1)
    found=$(( $(ls $B/findings | wc -l) - before ))
    echo "fuzz_$t: ${execs:-?} executions in ${SECONDS_EACH} s, $found finding(s), corpus $(ls $B/corpus_$t | wc -l) inputs (log: $log)"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then status=1; fi
done
exit $status
