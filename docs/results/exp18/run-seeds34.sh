#!/bin/sh
# Session 2026-12-03 (2): paired seeds 3 and 4 for the arms the verdict compares (toward the
# protocol's >= 5 seeds), same size; run after run-missing.sh, before run-pareto.sh. Resumable.
SIZE="--steps 60 --tasks 256 --prompts-per-step 8 --group-size 16 --eval-tasks 64 --eval-n 16 --forktree-tasks 64 --forktree-budget 32 --pool-n 8 --sft-steps 40 --free-n 0"
ARMS="--arm grpo --arm strat-v2 --arm grpo-unscored --arm grpo+replay --arm grpo+unbal-replay --arm grpo+kl"
W=docs/results/exp18
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed3 $SIZE --seed 3 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed4 $SIZE --seed 4 $ARMS
