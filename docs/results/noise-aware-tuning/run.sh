#!/usr/bin/env bash
# Noise-aware public tuning (tuning-noise): the quickstart's setting (SST-2, 4,000 sentences, source-grouped
# 25% public split, public-tuned encoder, supervised M1 with m' = 2) with PrivUnit at a whole-record pure
# 6.28 per user (5.652 embedding + 0.628 RR label), the encoder tuned on the public sentences without and
# with the run's mechanism in the forward pass; 3 seeds each. Run from the repository root.
set -euo pipefail
export SANITAS_DATA_DIR="${SANITAS_DATA_DIR:-../shared/data}"
sanitas sweep simulations/experiments/quickstart.toml --grid 'tuning-noise=false,true' --seeds 1,2,3 \
    --set 'sentence-mechanism="privunit"' --set sentence-epsilon=5.652 --set reference-accuracy=0 \
    --out results --name noise-aware-tuning
