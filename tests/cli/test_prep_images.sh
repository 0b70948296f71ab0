# `hpctrain prep images`: small generated IDX files (exact values), bad files, and the real Fashion-MNIST.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# 12 train and 4 validation 2x3 images; pixel value = 10*label + position; gzip for train, plain for validation.
"$PY" - "$WORK" <<'PYEOF'
import gzip, struct, sys
work = sys.argv[1]
def images(n):  return struct.pack(">IIII", 0x803, n, 2, 3) + bytes((10 * (i % 4) + p) for i in range(n) for p in range(6))
def labels(n):  return struct.pack(">II", 0x801, n) + bytes(i % 4 for i in range(n))
with gzip.open(f"{work}/train-images-idx3-ubyte.gz", "wb") as f: f.write(images(12))
with gzip.open(f"{work}/train-labels-idx1-ubyte.gz", "wb") as f: f.write(labels(12))
open(f"{work}/t10k-images-idx3-ubyte", "wb").write(images(4))
open(f"{work}/t10k-labels-idx1-ubyte", "wb").write(labels(4))
open(f"{work}/bad-labels", "wb").write(labels(11))
open(f"{work}/truncated-images", "wb").write(images(12)[:-5])
PYEOF
expect_success "prep small IDX" "$HPCTRAIN" prep images --input-dir "$WORK" --labels a,b,c,d --output "$WORK/small.h5"
"$PY" - "$WORK/small.h5" <<'PYEOF' && ok "pixels, labels, mean/std round trip" || bad "small IDX content"
import h5py, json, sys, numpy as np
f = h5py.File(sys.argv[1])
assert f.attrs["task"] == "image-classification" and json.loads(f.attrs["label_names"]) == list("abcd")
px, lab, src = f["train/pixels"][:], f["train/labels"][:], f["train/source_index"][:]
assert px.shape == (12, 1, 2, 3) and px.dtype == np.uint8, px.shape
assert (lab == src % 4).all(), "labels do not follow source_index"
assert (px[:, 0].reshape(12, 6) == 10 * lab[:, None] + np.arange(6)).all(), "pixels do not follow their label"
mean = f["train/pixels"].attrs["mean"]
all_px = px.astype(np.float64) / 255
assert np.allclose(mean, [all_px.mean()]) and np.allclose(f["train/pixels"].attrs["std"], [all_px.std()], rtol=1e-6), (mean, all_px.mean())
assert f["validation"].attrs["num_examples"] == 4
PYEOF
expect_failure "label/image count mismatch" 'bad-labels.*11.*12|12.*11' "$HPCTRAIN" prep images --train-images "$WORK/train-images-idx3-ubyte.gz" \
  --train-labels "$WORK/bad-labels" --output "$WORK/x.h5"
expect_no_file "mismatch leaves no file" "$WORK/x.h5"
expect_failure "truncated IDX" 'truncated-images' "$HPCTRAIN" prep images --train-images "$WORK/truncated-images" \
  --train-labels "$WORK/train-labels-idx1-ubyte.gz" --output "$WORK/x.h5"
expect_failure "too few label names" 'label 3 .*3 label names' "$HPCTRAIN" prep images --input-dir "$WORK" --labels a,b,c --output "$WORK/x.h5"

FASHION=/usr/share/datasets/fashion-mnist
if [[ -f "$FASHION/train-images-idx3-ubyte.gz" ]]; then
  expect_success "prep Fashion-MNIST" "$HPCTRAIN" prep images --input-dir "$FASHION" --labels fashion-mnist --output "$WORK/fashion.h5"
  expect_success "inspect Fashion-MNIST" "$HPCTRAIN" inspect "$WORK/fashion.h5" --json
  "$PY" -c "import json,sys; d=json.load(open('$WORK/out')); s={x['name']:x for x in d['splits']}; sys.exit(0 if s['train']['num_examples']==60000 and s['validation']['num_examples']==10000 and d['label_names'][9]=='Ankle boot' and all(h['count']==6000 for h in s['train']['label_histogram']) else 1)" \
    && ok "Fashion-MNIST 60000/10000, balanced" || { bad "Fashion-MNIST summary"; head -40 "$WORK/out"; }
else
  echo "skip: $FASHION not installed (Debian package dataset-fashion-mnist)"
fi

finish
