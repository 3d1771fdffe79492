#!/bin/sh
# Session 2026-12-03 (3): KL-Cov and Clip-Cov swept over their selected share, for the
# matched-entropy comparison (the budget: grpo-unscored's end feasible-entry entropy per seed,
# 0.546-0.606 nats at this size; r = 0.01, the arms' default, ended below it). Same size as the
# other scripts (hence --free-n 0: the same configuration key), seed by seed. Resumable.
SIZE="--steps 60 --tasks 256 --prompts-per-step 8 --group-size 16 --eval-tasks 64 --eval-n 16 --forktree-tasks 64 --forktree-budget 32 --pool-n 8 --sft-steps 40 --free-n 0"
ARMS="--arm kl-cov@0.05 --arm clip-cov@0.05 --arm kl-cov@0.2 --arm clip-cov@0.2"
W=docs/results/exp18
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W $SIZE --seed 0 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed1 $SIZE --seed 1 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed2 $SIZE --seed 2 $ARMS
