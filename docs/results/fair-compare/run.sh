#!/usr/bin/env bash
# The fair comparison (docs/results/fair-compare/README.md): local DP at whole-record per-user epsilon
# (labels protected, the split chosen on public data) against user-level central DP, 3 seeds per point,
# on SST-2 with a source-grouped 25% public split, SST-2 with IMDB sentences as public data, and AG News;
# then what `sanitas tune` chooses per epsilon. Run from the repository root; results go to results/.
set -euo pipefail
export SANITAS_DATA_DIR="${SANITAS_DATA_DIR:-../shared/data}"
LOCAL=0.5,1,2,3.14,6.28,12.6
CENTRAL=0.5,1,2,4,8
COMMON=(--seeds 1,2,3 --central-set 'map-in="identity"' --central-set num-server-rounds=50 --out results)

sanitas compare simulations/experiments/agnews_fair.toml --epsilons "$LOCAL" --central-epsilons "$CENTRAL" \
    --labels-clear "${COMMON[@]}" --name fair-agnews
sanitas compare simulations/experiments/sst2_fair.toml --epsilons "$LOCAL" --central-epsilons "$CENTRAL" \
    "${COMMON[@]}" --name fair-sst2
sanitas compare simulations/experiments/sst2_fair.toml --epsilons "$LOCAL" --central-epsilons "$CENTRAL" \
    --set public-fraction=0 --set 'public-dataset="imdb"' --set public-sentences=true --set public-size=3000 \
    "${COMMON[@]}" --name fair-sst2-imdb-public
for cfg in sst2_fair agnews_fair; do
    sanitas tune "simulations/experiments/$cfg.toml" --epsilons "$LOCAL" --out "results/tune-$cfg"
done
