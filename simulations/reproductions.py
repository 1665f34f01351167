"""The registry of paper reproductions that ``sanitas reproduce NAME`` runs.

Each entry names a flat run-config file under ``simulations/reproductions/``, the sweep grid
(products, as ``sanitas sweep --grid``), the seeds, which grid key is the x axis and which the
series, and the paper's numbers for the points it reports (docs/SPEC.md §12, where the settings
behind each number are listed). Our numbers come from the repository's honest pipeline (frozen
MiniLM encoder, a public or random M1), so they are *not expected* to equal the paper's; the
``differences`` say why, and ``docs/REPRODUCTION.md`` discusses each claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SPEC_DIR = Path(__file__).resolve().parent / "reproductions"


@dataclass(frozen=True)
class Reproduction:
    """One figure or table of a paper, as a seeded sweep.

    ``blocks``: the sweep's products (each a list of ``KEY=V1,V2`` grid specs). ``x``: the grid
    key on the plot's x axis; ``series``: the grid key whose values are the lines. ``paper``:
    (series value, x value) -> the paper's number (same metric as ``metric``). ``quick``: grid
    specs and ``--set`` items of a tiny version for CI (seconds per run, not a measurement).
    """

    name: str
    title: str
    citation: str
    config: str
    blocks: tuple[tuple[str, ...], ...]
    x: str
    series: str
    metric: str = "accuracy"
    seeds: tuple[int, ...] = (1, 2, 3)
    paper: Mapping[tuple[str, float], float] = field(default_factory=dict)
    paper_note: str = ""
    differences: tuple[str, ...] = ()
    quick_blocks: tuple[tuple[str, ...], ...] = ()
    quick_sets: tuple[str, ...] = ()
    log_x: bool = False

    @property
    def config_path(self) -> Path:
        return SPEC_DIR / self.config


_DU_DIFFERENCES = (
    "Encoder: frozen all-MiniLM-L6-v2 (384-d mean pooling) instead of fully fine-tuned bert-base-uncased "
    "(768-d pooler); our non-private line is a frozen-encoder probe, not a fine-tuned BERT.",
    "Map: M1 is trained on a seeded 10% public split and frozen (local DP holds); the paper trains M1 and "
    "BERT through the noise on private data (the leaky flow of docs/SPEC.md §3.2, which voids local DP).",
    "Federation: one release per user (one round, every user), the server trains M2 + classifier on the "
    "releases; the paper adds fresh noise at every epoch of centralised training.",
    "m' stops at 384 (the encoder's dimension; 'identity' = no map) instead of 768.",
)

# Du et al. (2023) Table 2, epsilon1 = 10, labels in the clear (docs/SPEC.md §12.1).
_DU_TABLE2_SST2 = {
    **{
        ("purkayastha", m): v
        for m, v in zip((16, 32, 64, 128, 256), (0.9243, 0.8853, 0.8050, 0.7534, 0.6663), strict=True)
    },
    **{
        ("planar_laplace", m): v
        for m, v in zip((16, 32, 64, 128, 256), (0.9209, 0.8830, 0.8326, 0.7557, 0.6789), strict=True)
    },
    **{("none", m): v for m, v in zip((16, 32, 64, 128, 256), (0.9335, 0.9243, 0.9266, 0.9243, 0.9226), strict=True)},
}

REPRODUCTIONS: dict[str, Reproduction] = {
    r.name: r
    for r in (
        Reproduction(
            name="du2023-table2-sst2",
            title="Du et al. 2023, Table 2 on SST-2: accuracy vs m' at epsilon1 = 10 (labels in the clear)",
            citation="Du, Yue, Chow, Sun. Sanitizing Sentence Embeddings (and Labels) for Local Differential "
            "Privacy. WWW 2023, Table 2",
            config="du2023_sst2.toml",
            blocks=(
                ('sentence-mechanism="purkayastha","planar_laplace","none"', "map-dim=16,32,64,128,256"),
                ('sentence-mechanism="purkayastha","planar_laplace","none"', 'map-in="identity"', "map-dim=384"),
            ),
            x="map-dim",
            series="sentence-mechanism",
            paper=_DU_TABLE2_SST2,
            paper_note="bert-base fine-tuned through the noise (leaky M1); its m' = 512 and 768 rows have no "
            "counterpart here",
            differences=_DU_DIFFERENCES,
            quick_blocks=(('sentence-mechanism="purkayastha"', "map-dim=16"),),
            quick_sets=("train-size=300", "test-size=60", "public-epochs=1", "server-epochs=1", "users-per-node=300"),
            log_x=True,
        ),
        Reproduction(
            name="du2023-figure2-sst2",
            title="Du et al. 2023, Figure 2 on SST-2: accuracy vs epsilon1 at m' = 16 (labels in the clear)",
            citation="Du et al., WWW 2023, Figure 2",
            config="du2023_sst2.toml",
            blocks=(
                ('sentence-mechanism="purkayastha","planar_laplace"', "sentence-epsilon=1,2,4,6,8,10,12"),
                ('sentence-mechanism="none"',),
            ),
            x="sentence-epsilon",
            series="sentence-mechanism",
            paper_note="(qualitative) both about 0.93 at epsilon1 = 12; planar Laplace ahead at small "
            "epsilon1, Purkayastha slightly ahead above 8",
            differences=_DU_DIFFERENCES,
            quick_blocks=(('sentence-mechanism="purkayastha"', "sentence-epsilon=4"),),
            quick_sets=("train-size=300", "test-size=60", "public-epochs=1", "server-epochs=1", "users-per-node=300"),
        ),
        Reproduction(
            name="du2023-figure3-sst2",
            title="Du et al. 2023, Figure 3 on SST-2: accuracy vs label epsilon2 at epsilon1 = 8, m' = 16",
            citation="Du et al., WWW 2023, Figure 3",
            config="du2023_sst2.toml",
            blocks=(('label-mechanism="rr","rr_prior"', "label-epsilon=0.5,1,2,3", "sentence-epsilon=8"),),
            x="label-epsilon",
            series="label-mechanism",
            paper_note="(qualitative) binary RR costs 0.01-0.19 accuracy over epsilon2 in [0.5, 3]",
            differences=(
                *_DU_DIFFERENCES,
                "RR-with-prior (Ghazi et al. 2021) is described but not implemented in the paper's code; its "
                "prior here is the server model on the user's own sanitized embedding (label-prior = model).",
            ),
            quick_blocks=(('label-mechanism="rr"', "label-epsilon=1", "sentence-epsilon=8"),),
            quick_sets=("train-size=300", "test-size=60", "public-epochs=1", "server-epochs=1", "users-per-node=300"),
        ),
    )
}


def get(name: str) -> Reproduction:
    """The registered reproduction ``name`` (a clear error listing the known names otherwise)."""
    try:
        return REPRODUCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown reproduction {name!r}; known: {', '.join(sorted(REPRODUCTIONS))}") from None
