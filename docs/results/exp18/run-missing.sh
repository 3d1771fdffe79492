#!/bin/sh
# Session 2026-12-03 (2): the arms the first runs left out, same size and seeds, seed by seed
# (one process, niced; the machine was shared with the test suite and other work).
# Resumable: rerunning skips the (arm, seed) pairs already in each workdir's results.jsonl.
SIZE="--steps 60 --tasks 256 --prompts-per-step 8 --group-size 16 --eval-tasks 64 --eval-n 16 --forktree-tasks 64 --forktree-budget 32 --pool-n 8 --sft-steps 40 --free-n 0"
ARMS="--arm shuffled --arm grpo+kl --arm sft+grpo --arm strat-v2+replay --arm kl-cov --arm clip-cov --arm grpo+unbal-replay"
W=docs/results/exp18
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W $SIZE --seed 0 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed1 $SIZE --seed 1 $ARMS
nice -n 19 .venv/bin/forkgate experiment countdown --workdir $W/seed2 $SIZE --seed 2 $ARMS
