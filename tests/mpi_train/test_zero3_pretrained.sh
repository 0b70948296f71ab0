# --zero-stage 3 from pretrained weights (--model) loads each unit from the memory-mapped safetensors as it is
# sharded (Note [Deferred materialization]: no rank builds the whole model or holds a copy of the files' tensors):
# fine-tuning a saved model on 2 ranks ends where stage 0's does (1e-6 relative per tensor), with the same load
# report; a model whose weights hold a NaN is refused naming the tensor, as at stage 0.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
source "$HERE/zero3_lib.sh"
STEPS=2 zero_run base 2 0
ft=(--model "$WORK/base/final" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --threads 1 --no-progress --logging-steps 1
    --lr 5e-3 "${adamw[@]}" --max-steps 4 --save-steps 100 --batch-size 2)
for s in 0 3; do run_ok "fine-tune from --model at stage $s" "$WORK/ft$s.log" mpi 2 train "${ft[@]}" --output "$WORK/ft$s" \
  --zero-stage $s; done
same "from --model, 2 ranks: stage 3 == stage 0" ft0 ft3 --skip k_lin.bias
[[ -n $(grep -o "loaded [0-9]* tensor(s)" "$WORK/ft3.log") && $(grep -o "loaded [0-9]* tensor(s)" "$WORK/ft0.log") == \
   $(grep -o "loaded [0-9]* tensor(s)" "$WORK/ft3.log") ]] && ok "the same load report" || bad "load report"
"$PY" - "$WORK/base/final/model.safetensors" <<'PYEOF'
import json, struct, sys
path = sys.argv[1]
blob = bytearray(open(path, "rb").read())
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8 : 8 + n])
start = 8 + n + header["classifier.weight"]["data_offsets"][0]
blob[start : start + 4] = struct.pack("<f", float("nan"))
open(path, "wb").write(blob)
PYEOF
mpi 2 train "${ft[@]}" --output "$WORK/nan" --zero-stage 3 >"$WORK/nan.log" 2>&1 && bad "NaN weights accepted" || {
  grep -q "tensor 'classifier.weight' holds 1 NaN/Inf value(s)" "$WORK/nan.log" && ok "NaN weights refused at stage 3, naming the tensor" \
    || { bad "NaN message"; tail -5 "$WORK/nan.log"; }; }
finish
