#!/bin/sh
# Session 2026-12-03 (2): the pass@1–EC@16 Pareto sweep over the KL and replay weights (the
# defaults grpo+kl@0.3 and grpo+replay@0.5 ran as the arms themselves), same size, seed by seed,
# started after run-missing.sh and run-seeds34.sh. Resumable like the other scripts.
SIZE="--steps 60 --tasks 256 --prompts-per-step 8 --group-size 16 --eval-tasks 64 --eval-n 16 --forktree-tasks 64 --forktree-budget 32 --pool-n 8 --sft-steps 40 --free-n 0"
ARMS="--arm grpo+kl@0.1 --arm grpo+kl@1 --arm grpo+replay@0.2 --arm grpo+replay@1"
W=docs/results/exp18
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W $SIZE --seed 0 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed1 $SIZE --seed 1 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed2 $SIZE --seed 2 $ARMS
