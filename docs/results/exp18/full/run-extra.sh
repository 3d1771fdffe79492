#!/bin/sh
# The full protocol's extra arms, in their own workdirs (x-seed*): the entry KL at the
# recommended weight, and KL-Cov / Clip-Cov swept over their second knob at a share of 1 for
# the matched-entropy comparison (the share alone does not reach the budget: see the report).
# "sweep" runs the entry-KL and replay weights in the seed's run.sh workdir (which holds its
# fork trees). Resumable like run.sh.
#   usage: docs/results/exp18/full/run-extra.sh kl|kl-cov|clip-cov|sweep SEED...
set -e
W=docs/results/exp18/full
WHAT=$1; shift
case $WHAT in
  kl) ARMS="--arm grpo+kl@0.1" ;;
  kl-cov) ARMS="--arm kl-cov@1/1 --arm kl-cov@1/10" ;;
  clip-cov) ARMS="--arm clip-cov@1/-1 --arm clip-cov@1/0 --arm clip-cov@1/0.25" ;;
  sweep) ARMS="--arm grpo+kl@0.3 --arm grpo+kl@1 --arm grpo+replay@0.2 --arm grpo+replay@1" ;;
  *) echo "usage: $0 kl|kl-cov|clip-cov|sweep SEED..." >&2; exit 2 ;;
esac
for s in "$@"; do
  if [ "$WHAT" = sweep ]; then D=$W/seed$s; else D=$W/x-seed$s; fi
  .venv/bin/forkgate experiment countdown --workdir "$D" --seed "$s" $ARMS
done
