#!/usr/bin/env bash
# Steps 1 and 2 of the card's check in one window of card time (about 10 minutes), every part under its own
# time limit so that what finished comes back even when a later part runs long:
#   1. correctness (CUDA vs CPU, every kernel vs the reference kernel) in parallel shards: compiling flex
#      kernels is CPU work, and the card idles between shards' calls;
#   2. speed, memory, one retrieval prompt and the out-of-memory row, alone on the card;
#   3. `extrapolate bench` of the `base` model against transformers' Llama, profiled per length.
# usage: bash scripts/gpu_window.sh OUT        (DEVICE=cpu QUICK=1 rehearses it on a CPU at tiny sizes)
# A shorter window: CHECK_ENCODINGS / SPEED_ENCODINGS (comma lists), SPEED_LENGTHS, BENCH_LENS, and the time
# limits below (CHECK_S, PART_S, SPEED_S, SPEED_DEADLINE, BENCH_S, in seconds). CPU_BENCH=1 also times
# ALiBi and T5 against RoPE on the host CPU at 2 threads.
set -u
out=${1:-results/gpu-check}
device=${DEVICE:-cuda}
shards=${SHARDS:-8}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python=${PYTHON:-python3}
mkdir -p "$out/logs"
if [ -n "${QUICK:-}" ]; then
  quick=(--quick --lengths 512 --compare-lengths 256)
  bench_lens=256,512
else
  quick=()
  bench_lens=${BENCH_LENS:-4k,8k,16k,32k}
fi
check_names=(); speed_names=(); speed_lengths=()
[ -n "${CHECK_ENCODINGS:-}" ] && check_names=(--encodings "$CHECK_ENCODINGS")
[ -n "${SPEED_ENCODINGS:-}" ] && speed_names=(--encodings "$SPEED_ENCODINGS")
[ -n "${SPEED_LENGTHS:-}" ] && speed_lengths=(--lengths "$SPEED_LENGTHS")
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  "$python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  git rev-parse HEAD 2>/dev/null
} >"$out/machine.txt"
cat "$out/machine.txt"

echo "== correctness, $shards shards"
for k in $(seq 1 "$shards"); do
  OMP_NUM_THREADS=2 TORCHINDUCTOR_COMPILE_THREADS=2 timeout "${CHECK_S:-230}" "$python" scripts/gpu_check.py --device "$device" "${quick[@]}" "${check_names[@]}" \
    --parts compare,kernels --shard "$k/$shards" --deadline "${PART_S:-105}" --out "$out" \
    >"$out/logs/shard-$k.log" 2>&1 &
done
wait
tail -n 3 "$out"/logs/shard-*.log

echo "== speed, retrieval, out of memory"
timeout "${SPEED_S:-160}" "$python" scripts/gpu_check.py --device "$device" "${quick[@]}" "${speed_names[@]}" \
  "${speed_lengths[@]}" --parts speed,retrieval,oom \
  --repeats 2 --deadline "${SPEED_DEADLINE:-120}" --tag speed --out "$out" 2>&1 | tee "$out/logs/speed.log" | tail -n 40
"$python" scripts/gpu_check.py --merge --out "$out" | tail -n 1
grep -c ",False" "$out/gpu_check.csv" | sed 's/^/rows not ok: /'
grep ",False" "$out/gpu_check.csv" | head -n 40

echo "== bench"
timeout "${BENCH_S:-170}" "$python" -m extrapolate bench --device "$device" --dtype bfloat16 --model "${BENCH_MODEL:-base}" \
  --encodings rope --eval-lens "$bench_lens" --profile --out "$out/bench" 2>&1 | tee "$out/logs/bench.log" | tail -n 30

# The card's host CPU, where it is another kind of CPU than the ones measured so far (an Intel Xeon with AMX:
# ALiBi's and T5's fused-bias path against RoPE's SDPA, at the 2 threads of results/bench-cpus' machines)
if [ -n "${CPU_BENCH:-}" ]; then
  echo "== host CPU bench"
  OMP_NUM_THREADS=2 timeout "${CPU_BENCH_S:-120}" "$python" -m extrapolate bench --device cpu --model small \
    --eval-lens "${CPU_BENCH_LENS:-16k}" --encodings rope,alibi,t5 --no-transformers --out "$out/bench-cpu" 2>&1 |
    tee "$out/logs/bench-cpu.log" | tail -n 12
  OMP_NUM_THREADS=2 timeout "${CPU_BENCH_S:-120}" "$python" benchmarks/fused_variants.py --length 16384 \
    --out "$out/bench-cpu/variants.csv" 2>&1 | tee "$out/logs/variants-cpu.log"
fi
