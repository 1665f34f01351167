#!/usr/bin/env bash
# The 33 runs of docs/results/encoder-compare-sst2 (3 seeds x 11 points) as one `sanitas sweep`, timed:
# local DP at epsilon1 = 1, 2, 4, 8 (labels in the clear, as there); user-level central DP, head only, at the
# noise of per-user epsilon 0.5, 1, 2, 4, 8 (50 rounds); the LoRA + head central run at epsilon 2; the
# pipeline without noise. Each seed's 11 points share one federation (strategies.points).
# Usage (repository root, SANITAS_DATA_DIR set): bash docs/results/sweep-speed/grid.sh OUT [SEEDS]
# (SEEDS: default 1,2,3, the whole grid; 1 runs one seed's 11 points).
set -euo pipefail
out=${1:?usage: grid.sh OUT [SEEDS]}
seeds=${2:-1,2,3}
central=(--grid 'mode="central"' --grid 'map-in="identity"' --grid num-server-rounds=50)
start=$(date +%s)
sanitas sweep simulations/experiments/sst2_encoder.toml --seeds "$seeds" \
    --grid sentence-epsilon=1,2,4,8 \
    --also "${central[@]}" --grid central-noise-multiplier=1.42007,1.04916,0.824245,0.645186,0.499 \
    --also "${central[@]}" --grid central-noise-multiplier=0.824245 --grid 'central-train="encoder"' \
    --also --grid 'sentence-mechanism="none"' \
    --out "$out" --name encoder-compare-grid
echo "grid wall seconds: $(( $(date +%s) - start ))"
