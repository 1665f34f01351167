#!/usr/bin/env bash
# Local vs central DP at every release level (docs/results/every-level): the shipped word- and document-level
# configs, and the quickstart with its labels alone private, through `sanitas compare`. Each local point at its
# mechanism's unit and per user (group privacy over the units each user holds, simulations/drivers/compare_levels.py);
# central DP (DP-FedAvg, user level, 30 rounds, the settings of the sentence-level headline's central side,
# docs/results/federation-gain) at 1, 4 and 16 and at every per-user figure of at most 64, from the same public start,
# against the same public-only line; 3 seeds. The sentence level's row is docs/results/federation-gain's
# sst2-public200. Run from the repository root; results go to $1 (default results/every-level); the wall time of
# each command is in README.md.
#
#   bash docs/results/every-level/run.sh [RESULTS]
#   python docs/results/every-level/tables.py [RESULTS] --out docs/results/every-level
set -euo pipefail
export SANITAS_DATA_DIR="${SANITAS_DATA_DIR:-../shared/data}"
OUT="${1:-results/every-level}"
CENTRAL=(--central-epsilons 1,4,16 --central-set num-server-rounds=30 --central-set central-cohort-size=1000
    --central-set central-clip=1.0 --central-set local-epochs=1 --central-set client-learning-rate=1.0
    --central-set 'server-optimizer="adam"' --central-set server-learning-rate=0.01)
COMMON=(--seeds 1,2,3 "${CENTRAL[@]}" --out "$OUT")

# Word level: SST-2 (10,000 phrases), CMP over GloVe 6B 50d, with the 200 public texts of the sentence headline.
sanitas compare simulations/experiments/sst2_words.toml --epsilons 0.05,1,10 --set public-size=200 \
    --set 'public-split="source"' "${COMMON[@]}" --name sst2-words
# Document level: IMDB reviews and 20 Newsgroups posts, DeepCandidate (SentDP), half the documents public.
sanitas compare simulations/experiments/imdb_documents.toml --epsilons 1,3,10 "${COMMON[@]}" --name imdb-documents
sanitas compare simulations/experiments/newsgroups_documents.toml --epsilons 1,3,10 "${COMMON[@]}" \
    --name newsgroups-documents
# Label level: the quickstart's class-means recipe with the embedding in the clear and the labels alone under
# randomized response (per label; no per-user bound: the embedding is not protected).
sanitas compare simulations/experiments/quickstart.toml --epsilons 1,2,4 --set 'sentence-mechanism="none"' \
    --set 'sentence-options=""' "${COMMON[@]}" --name sst2-labels
