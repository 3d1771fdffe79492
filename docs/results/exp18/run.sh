#!/bin/sh
# The reduced protocol run for issue 18 (resumable: rerunning skips finished (arm, seed) pairs).
set -e
W=docs/results/exp18
SIZE="--steps 60 --tasks 256 --prompts-per-step 8 --group-size 16 --eval-tasks 64 --eval-n 16 --forktree-tasks 64 --forktree-budget 32 --pool-n 8 --sft-steps 40 --free-n 0"
# Part 1: the key arms, three paired seeds.
nice -n 10 .venv/bin/forkgate experiment countdown --workdir $W $SIZE --seed 0 --seed 1 --seed 2 \
  --arm grpo --arm grpo-unscored --arm grpo+replay --arm strat-v2
# Part 2: the other arms, same seeds.
nice -n 10 .venv/bin/forkgate experiment countdown --workdir $W $SIZE --seed 0 --seed 1 --seed 2 \
  --arm grpo+unbal-replay --arm strat-v2+replay --arm grpo+kl --arm sft+grpo --arm shuffled \
  --arm kl-cov --arm clip-cov
