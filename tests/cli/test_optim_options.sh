#!/usr/bin/env bash
# `hpctrain train --optim`: Hugging Face Trainer's names and aliases train (1 step each); an unknown name or
# a contradictory option ends with an error naming the option and what is allowed, before --output is made.
source "$2/tests/cli/hostile_lib.sh" "$@"

run() { "$HPCTRAIN" train $(train_args "$WORK/$1") --max-steps 1 "${@:2}"; }
expect_success "--optim adamw (alias of adamw_torch)" run adamw --optim adamw
grep -q 'optimizer: adamw_torch' "$WORK/out" "$WORK/err" && ok "adamw resolves to adamw_torch" || bad "adamw alias"
expect_success "--optim sgd with Nesterov momentum" run sgd --optim sgd --sgd-momentum 0.9 --sgd-nesterov
expect_success "--optim adafactor with relative step" run adafactor --optim adafactor --adafactor-relative-step
grep -q "lr and the schedule are not used" "$WORK/out" "$WORK/err" && ok "relative step: says --lr is unused" \
  || bad "relative step note"

expect_failure "unknown --optim" "--optim 'lion': unknown optimizer; expected one of adamw_torch \(adamw\), adafactor, sgd" \
  run lion --optim lion
expect_no_file "no --output for a bad option" "$WORK/lion"
expect_failure "--sgd-nesterov without momentum" "--sgd-nesterov needs --sgd-momentum > 0" run x --optim sgd --sgd-nesterov
expect_failure "--adafactor-warmup-init without relative step" "--adafactor-warmup-init needs --adafactor-relative-step" \
  run x --optim adafactor --adafactor-warmup-init
expect_failure "--adafactor-beta1 1" "--adafactor-beta1 1: expected 0 <= beta1" run x --optim adafactor --adafactor-beta1 1
expect_failure "--weight-decay -1" "--weight-decay -1: expected a finite number >= 0" run x --weight-decay -1
finish
