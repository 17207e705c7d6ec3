#!/usr/bin/env bash
# A poslab comparison grid as a Slurm job array: each array task runs its shard of the cells
# (poslab reads SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT), all writing into one shared
# directory; a dependent job aggregates once every task has finished.
#
#   sbatch --array=0-7 scripts/cluster/slurm_array.sh configs/experiments/catalogue.json /shared/runs/catalogue
#   sbatch --dependency=afterok:<array job id> --wrap "build/poslab compare --aggregate /shared/runs/catalogue"
#
# A failed or pre-empted task can be resubmitted as is (sbatch --array=K ...): finished cells are
# skipped and interrupted ones resume from their checkpoints.
#SBATCH --job-name=poslab-grid
#SBATCH --cpus-per-task=2
#SBATCH --time=02:00:00
#SBATCH --output=poslab-grid-%A_%a.log
set -euo pipefail
experiment=${1:?usage: sbatch --array=0-N scripts/cluster/slurm_array.sh EXPERIMENT.json OUT_DIR}
out=${2:?usage: sbatch --array=0-N scripts/cluster/slurm_array.sh EXPERIMENT.json OUT_DIR}
poslab=${POSLAB:-build/poslab}
exec "$poslab" compare --config "$experiment" --out "$out" --no-plots
