#!/bin/sh
# What actually ran for issue 18 (the machine was shared, so the seeds ran side by side, one
# workdir each; every workdir's results.jsonl has the same configuration key). Seed 0 ran in
# docs/results/exp18 (run.sh's first part, stopped after seed 0), seeds 1 and 2 here.
# Each command is resumable: rerunning it skips the (arm, seed) pairs already written.
SIZE="--steps 60 --tasks 256 --prompts-per-step 8 --group-size 16 --eval-tasks 64 --eval-n 16 --forktree-tasks 64 --forktree-budget 32 --pool-n 8 --sft-steps 40 --free-n 0"
ARMS="--arm strat-v2 --arm grpo-unscored --arm grpo --arm grpo+replay --arm grpo+unbal-replay"  # strat-v2 first: the verdict needs it
W=docs/results/exp18
nice -n 10 .venv/bin/forkgate experiment countdown --workdir $W/seed$1 $SIZE --seed $1 $ARMS
