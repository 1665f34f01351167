#!/usr/bin/env bash
# What the private users add over the model fitted on the public data alone (docs/results/federation-gain):
# local DP (the class-means recipe, whole-record pure epsilon per user, labels protected, on-device and
# server-side inference) against user-level central DP (DP-FedAvg, 30 rounds, from the same public start),
# 5 seeds per point for the headline comparisons (SST-2 and AG News with 200 public texts, SST-2 review-sentence
# users), 3 for the others, at
# several amounts of public data. Run from the repository root; results go to $1
# (default results/); about an hour on 2 CPU cores once the embeddings are cached, the LoRA runs as long again.
#
#   bash docs/results/federation-gain/run.sh [RESULTS]
#   python docs/results/federation-gain/tables.py [RESULTS] --out docs/results/federation-gain
set -euo pipefail
export SANITAS_DATA_DIR="${SANITAS_DATA_DIR:-../shared/data}"
OUT="${1:-results}"
LOCAL=1,2,3.14,6.28,12.6
CENTRAL=0.5,1,2,4,8
COMMON=(--central-set num-server-rounds=30 --out "$OUT")  # compare gives the central side the identity map itself
FIVE=(--seeds 1,2,3,4,5)
THREE=(--seeds 1,2,3)
SST2=simulations/experiments/sst2_public.toml
COHORTS=simulations/experiments/sst2_public_cohorts.toml
AG=simulations/experiments/agnews_public.toml

# SST-2: 200 and 2,000 public texts (whole source groups), a quarter of the training split by source, IMDB sentences.
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" "${FIVE[@]}" "${COMMON[@]}" --name sst2-public200
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set public-size=2000 "${THREE[@]}" "${COMMON[@]}" \
    --name sst2-public2000
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set public-size=0 \
    --set public-fraction=0.25 "${THREE[@]}" "${COMMON[@]}" --name sst2-public25pct
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set 'public-dataset="imdb"' \
    --set public-sentences=true --set public-size=3000 "${THREE[@]}" "${COMMON[@]}" --name sst2-imdb-public
# AG News: 200 public items and a quarter.
sanitas compare "$AG" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" "${FIVE[@]}" "${COMMON[@]}" --name agnews-public200
sanitas compare "$AG" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set public-size=0 \
    --set public-fraction=0.25 "${THREE[@]}" "${COMMON[@]}" --name agnews-public25pct
# SST-2, 200 public texts: the LoRA encoder trained centrally with the head (central epsilon 1 and 4).
sanitas compare "$SST2" --epsilons 6.28 --central-epsilons 1,4 --central-trains encoder "${THREE[@]}" "${COMMON[@]}" \
    --name sst2-public200-lora
# SST-2, 200 public texts, one user per review sentence (user-unit = "source": a user's record is every phrase of
# one sentence, released once under one budget) instead of one per GLUE phrase.
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set 'user-unit="source"' "${FIVE[@]}" "${COMMON[@]}" \
    --name sst2-public200-sentences
# SST-2, 200 public texts, the class-means recipe over two disjoint cohorts (docs/maps.md): map-dim, cohort-map-dim,
# the covariance and the label's share chosen per seed on its public draw by the tune emulation of the same protocol
# (the public-only model shipped where no candidate beats it there); one central point (the central side is the one
# of sst2-public200), then the line of sst2-public200's runs, the same draws and test users, pooled in.
sanitas compare "$COHORTS" --epsilons 3.14,6.28,12.6 --central-epsilons 0.5 "${FIVE[@]}" "${COMMON[@]}" \
    --name sst2-public200-cohorts
python -m simulations.drivers.compare_rederive "$OUT/sst2-public200-cohorts" --line-from "$OUT/sst2-public200"
