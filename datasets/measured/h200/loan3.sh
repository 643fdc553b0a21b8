#!/usr/bin/env bash
# The third H200 loan, as one device call: complete hands-off ResNet-18 runs with NVML's
# instantaneous power (fixed s0, settled s0, fixed s1, settled s1, in that order of
# priority), then the GPT decoder's settled s1 if time is left, so that the fixed against
# settled and the repeat comparisons come from one card and one loan.
#
# Run in the repository root on the device machine:
#     OUT=/some/folder bash datasets/measured/h200/loan3.sh
# It changes no setting of the card (tools/collect_gpu_corpus.py --hands-off calls no NVML
# setter) and reads nvidia-smi before and after. Each run starts only if its budget still
# fits before SOFT_S seconds; every run is killed at HARD_S; after each run the run folders
# are packed into $OUT/runs.tgz (the device tool brings back at most 8 files).
# COLLECT replaces the collector (to try the script without a GPU, as it was tried
# against the test suite's fake NVML before the loan; no test runs it).
set -u
: "${OUT:?set OUT to the results folder}"
COLLECT=${COLLECT:-python3 tools/collect_gpu_corpus.py}
SOFT_S=${SOFT_S:-515}  # every run should be over by then
HARD_S=${HARD_S:-545}  # and is killed then (the device call's limit is 560 s)
START_S=${START_S:-15}  # a collector's start: python, torch, CUDA, the two models
WORK=${WORK:-/tmp/loan3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$WORK" "$OUT"

log() { echo "[$(printf %4d "$SECONDS") s] $*" | tee -a "$OUT/driver.log"; }
smi() {
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi -q -d POWER,CLOCK >"$OUT/$1" 2>&1
    else
        echo "no nvidia-smi here" >"$OUT/$1"
    fi
}
pack() { tar czf "$OUT/runs.tgz" -C "$WORK" .; }
rows() {  # configurations per workload CSV of a run folder
    local f
    for f in "$1"/*_*.csv; do
        case $f in *.minibatches.csv | *.power.csv | *"*"*) continue ;; esac
        printf '%s %d; ' "$(basename "$f" .csv)" $(($(wc -l <"$f") - 1))
    done
}

# run NAME BUDGET_S CHUNK_S ARGS...: one collection into $WORK/NAME; BUDGET_S is its
# nominal budget, cut to what is left; CHUNK_S: how far its last chunk may overrun
run() {
    local name=$1 nominal=$2 chunk=$3
    shift 3
    local left=$((SOFT_S - SECONDS - START_S - chunk))
    local budget=$((nominal < left ? nominal : left))
    if ((budget < 10 || HARD_S - SECONDS < 10)); then
        log "$name $*: skipped, $left s left"
        return
    fi
    local t=$SECONDS
    log "$name $*: budget $budget s"
    timeout -s INT $((HARD_S - SECONDS)) $COLLECT --hands-off --out "$WORK/$name" \
        --budget-s "$budget" "$@" >>"$OUT/driver.log" 2>&1
    local rc=$?
    log "$name: rc $rc after $((SECONDS - t)) s; $(rows "$WORK/$name")"
    pack
}

smi nvidia-smi-before.txt
log "start: $(nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm \
    --format=csv,noheader 2>/dev/null)"
run instant-fixed-s0-l3 110 40 --seed 0 --workloads resnet18
run instant-settled-s0-l3 110 40 --seed 0 --settle-tol 0.01 --workloads resnet18
run instant-fixed-s1-l3 110 40 --seed 1 --workloads resnet18
run instant-settled-s1-l3 110 40 --seed 1 --settle-tol 0.01 --workloads resnet18
run instant-settled-s1-l3 40 6 --seed 1 --settle-tol 0.01 --workloads gpt-small
smi nvidia-smi-after.txt
pack
log "done"
