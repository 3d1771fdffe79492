#!/bin/sh
# The full protocol of issue 18 (docs/experiment-countdown.md): the options' defaults — 200
# steps, 256 training tasks, 8 prompts x 16 rollouts per step, 256 held-out tasks x 32 samples,
# the intervention at start and end with 64 free samples per pair. One workdir per seed, two
# seeds at a time (one torch thread each; the machine has 2 cores). Resumable: rerunning skips
# the (arm, seed) pairs already in each seed's results.jsonl.
#   usage: docs/results/exp18/full/run.sh PHASE SEED...
#   phase 1: the arms the verdict compares; phase 2: the other arms (grpo+kl@0.1 and the
#   token-level sweeps: run-extra.sh).
# What ran (fourth and fifth sessions): phase 1 for seeds 0-4, phase 2 for the seeds whose
# records are in seed*/results.jsonl (docs/experiment-countdown.md says which).
set -e
W=docs/results/exp18/full
PHASE=$1; shift
case $PHASE in
  1) ARMS="--arm grpo --arm strat-v2 --arm grpo-unscored --arm grpo+replay --arm grpo+unbal-replay" ;;
  2) ARMS="--arm strat-v2+replay --arm sft+grpo --arm shuffled" ;;
  *) echo "usage: $0 PHASE SEED..." >&2; exit 2 ;;
esac
for s in "$@"; do echo "$s"; done | xargs -P 2 -I{} \
  .venv/bin/forkgate experiment countdown --workdir $W/seed{} --seed {} $ARMS
