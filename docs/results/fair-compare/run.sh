#!/usr/bin/env bash
# The fair comparison (docs/results/fair-compare/README.md): local DP at whole-record per-user epsilon
# (labels protected, the split chosen on public data) against user-level central DP (30 rounds), 3 seeds
# per point, on SST-2 with a source-grouped 25% public split and on AG News; what `sanitas tune` chooses;
# and SST-2 with IMDB sentences as public data.
# Run from the repository root; results go to results/ (about 2 hours on 2 CPU cores).
set -euo pipefail
export SANITAS_DATA_DIR="${SANITAS_DATA_DIR:-../shared/data}"
LOCAL=0.5,1,2,3.14,6.28,12.6
CENTRAL=0.5,1,2,4,8
COMMON=(--seeds 1,2,3 --central-set 'map-in="identity"' --central-set num-server-rounds=30 --out results)

sanitas compare simulations/experiments/sst2_fair.toml --epsilons "$LOCAL" --central-epsilons "$CENTRAL" \
    "${COMMON[@]}" --name fair-sst2
sanitas compare simulations/experiments/agnews_fair.toml --epsilons "$LOCAL" --central-epsilons "$CENTRAL" \
    --labels-clear "${COMMON[@]}" --name fair-agnews
for cfg in agnews_fair sst2_fair; do
    sanitas tune "simulations/experiments/$cfg.toml" --epsilons 3.14,6.28 --out "results/tune-$cfg"
done
sanitas compare simulations/experiments/sst2_fair.toml --epsilons "$LOCAL" --central-epsilons "$CENTRAL" \
    --set public-fraction=0 --set 'public-dataset="imdb"' --set public-sentences=true --set public-size=3000 \
    "${COMMON[@]}" --name fair-sst2-imdb-public
