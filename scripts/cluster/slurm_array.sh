#!/usr/bin/env bash
# A poslab comparison grid as a Slurm job array: array task K runs shard K of N of the cells, all
# writing into one shared directory; a dependent job aggregates once every task has finished.
#
#   sbatch --array=0-7 scripts/cluster/slurm_array.sh configs/experiments/catalogue.json /shared/runs/catalogue 8
#   sbatch --dependency=afterok:<array job id> --wrap "build/poslab compare --aggregate /shared/runs/catalogue"
#
# A failed or pre-empted task K can be resubmitted alone with the same N (sbatch --array=K ... 8): finished
# cells are skipped and interrupted ones resume from their checkpoints. Without N, poslab reads the shard
# from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, which only an array of consecutive ids (0-7) gives.
#SBATCH --job-name=poslab-grid
#SBATCH --cpus-per-task=2
#SBATCH --time=02:00:00
#SBATCH --output=poslab-grid-%A_%a.log
set -euo pipefail
usage="usage: sbatch --array=0-N-1 scripts/cluster/slurm_array.sh EXPERIMENT.json OUT_DIR [N]"
experiment=${1:?$usage}
out=${2:?$usage}
shards=${3:-}
poslab=${POSLAB:-build/poslab}
if [ -n "$shards" ]; then
  exec "$poslab" compare --config "$experiment" --out "$out" --no-plots --shard "${SLURM_ARRAY_TASK_ID:?not in a job array}/$shards"
fi
exec "$poslab" compare --config "$experiment" --out "$out" --no-plots
