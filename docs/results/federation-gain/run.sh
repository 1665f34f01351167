#!/usr/bin/env bash
# What the private users add over the model fitted on the public data alone (docs/results/federation-gain):
# local DP (the class-means recipe, whole-record pure epsilon per user, labels protected, on-device and
# server-side inference) against user-level central DP (DP-FedAvg, 30 rounds, from the same public start),
# 3 seeds per point, at several amounts of public data. Run from the repository root; results go to $1
# (default results/); about an hour on 2 CPU cores once the embeddings are cached, the LoRA runs as long again.
#
#   bash docs/results/federation-gain/run.sh [RESULTS]
#   python docs/results/federation-gain/tables.py [RESULTS]
set -euo pipefail
export SANITAS_DATA_DIR="${SANITAS_DATA_DIR:-../shared/data}"
OUT="${1:-results}"
LOCAL=1,2,3.14,6.28,12.6
CENTRAL=0.5,1,2,4,8
COMMON=(--seeds 1,2,3 --central-set 'map-in="identity"' --central-set num-server-rounds=30 --out "$OUT")
SST2=simulations/experiments/sst2_public.toml
AG=simulations/experiments/agnews_public.toml

# SST-2: 200 and 2,000 public texts (whole source groups), a quarter of the training split by source, IMDB sentences.
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" "${COMMON[@]}" --name sst2-public200
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set public-size=2000 "${COMMON[@]}" \
    --name sst2-public2000
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set public-size=0 \
    --set public-fraction=0.25 "${COMMON[@]}" --name sst2-public25pct
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set 'public-dataset="imdb"' \
    --set public-sentences=true --set public-size=3000 "${COMMON[@]}" --name sst2-imdb-public
# AG News: 200 public items and a quarter.
sanitas compare "$AG" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" "${COMMON[@]}" --name agnews-public200
sanitas compare "$AG" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set public-size=0 \
    --set public-fraction=0.25 "${COMMON[@]}" --name agnews-public25pct
# SST-2, 200 public texts: the LoRA encoder trained centrally with the head (central epsilon 1 and 4).
sanitas compare "$SST2" --epsilons 6.28 --central-epsilons 1,4 --central-trains encoder "${COMMON[@]}" \
    --name sst2-public200-lora
# SST-2, 200 public texts, one user per review sentence (user-unit = "source": a user's record is every phrase of
# one sentence, released once under one budget) instead of one per GLUE phrase.
sanitas compare "$SST2" --epsilons "$LOCAL" --central-epsilons "$CENTRAL" --set 'user-unit="source"' "${COMMON[@]}" \
    --name sst2-public200-sentences
