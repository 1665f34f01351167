"""``sanitas attack RESULTS_DIR``: what an adversary still learns from a run, next to its epsilon.

For one run folder (or every run of a sweep or comparison folder) this rebuilds
the targets from the run's config and ``attack/state.pt`` (``fl.attacks.state``)
and runs the attacks of ``fl.attacks``:

* ``mia``: the threshold attacks (confidence, loss, entropy, modified entropy)
  against the final server model, members = documents the model learnt from,
  non-members = test documents; ``lira``: offline LiRA with shadow models
  trained on sanitized public documents (the same recipe and mechanism);
* ``attribute``: the 20 Newsgroups group of a post predicted from its release
  (the run's M1 and local mechanism applied to the posts), by a classifier
  trained on other posts' releases. A newsgroup is sensitive: a post in
  talk.religion.misc, soc.religion.christian, alt.atheism or talk.politics.*
  reveals a religious or political affiliation (special-category data under
  the GDPR, Art. 9);
* ``inversion``: the content words of a test document recovered from its
  release (learned map trained on the releases of public documents), and the
  exact sentence recovered by nearest neighbour in a public pool that holds the
  victims' sentences.

Releases of arbitrary texts come from the node's real release code
(``clients.ldp_client.release``) on a node that holds those texts, with the
run's config, M1 and mechanism, so the attacker sees exactly what a server
would. Central-mode runs release no per-user embedding: attribute inference and
inversion do not apply there (recorded as such); membership inference does.
Every result records the attacker knowledge it assumes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fl.attacks import attribute as attribute_mod
from fl.attacks import inversion as inversion_mod
from fl.attacks import mia
from fl.attacks.state import AttackState
from fl.reporting.progress import bar as progress_bar
from simulations.outputs.writers import columns_of, pyplot, read_csv, save_figure, write_csv

log = logging.getLogger(__name__)

ATTACKS = ("mia", "lira", "attribute", "inversion")
ATTRIBUTE_DATASET = "20newsgroups"


# ---------------------------------------------------------------------------- the run's pipeline, replayed
class Pipeline:
    """The run's encoder, M1 and local release code for arbitrary texts (never touches the run's nodes)."""

    def __init__(self, cfg: Any, state: AttackState) -> None:
        from fl.levels.channels import channel_class
        from fl.levels.spec import LevelSpec

        self.cfg = cfg
        self.state = state
        self.spec = LevelSpec.from_config(cfg)
        self.level = self.spec.level
        self.setup = None
        if channel_class(self.level).needs_public_setup:
            # seeded, from public documents: cached
            self.setup = channel_class(self.level).public_setup(self.spec, "cpu")

    def embed(self, texts: Sequence[str]) -> Any:
        """Encoder embeddings [n, d] (document level: the sentence embeddings per document)."""
        from fl.encoding.documents import embed_sentences
        from fl.encoding.encoder import best_device, embed_texts

        if self.level == "document":
            return embed_sentences(list(texts), self.cfg.encoder, self.cfg.server.device, progress=False)
        emb = embed_texts(list(texts), self.cfg.encoder, best_device(self.cfg.server.device), progress=False)
        return torch.as_tensor(np.asarray(emb), dtype=torch.float32)

    def clean(self, texts: Sequence[str]) -> torch.Tensor:
        """The model's noise-free input for each text (n(M1 x); document level: the recoded mean)."""
        from fl.maps import input_map as maps

        emb = self.embed(texts)
        if self.level == "document":
            assert self.setup is not None
            return self.setup.clean(emb).to(torch.float32)
        return maps.apply_input_map(emb, self.state.matrix).to(torch.float32)

    def releases(self, texts: Sequence[str], labels: Sequence[int], seed: int) -> np.ndarray:
        """What a node holding these texts releases under the run's config (fresh noise from ``seed``)."""

        from fl.cohort import Cohort, word_counts
        from fl.levels.channels import make_channels
        from fl.maps import input_map as maps
        from fl.release import NodeState, release

        if self.cfg["map-in"] == "leaky":
            raise ValueError("map-in = 'leaky' runs have no local release flow to replay")
        n = len(texts)
        emb = self.embed(texts)
        docs = emb if self.level == "document" else None
        x = docs.means() if docs is not None else emb
        d = int(x.shape[1])
        y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        rows = np.arange(n, dtype=np.int64)
        num_classes = self.state.num_classes
        cohort = Cohort(
            0,
            1,
            n,
            0,
            range(n),
            range(0),
            rows,
            rows,
            x,
            y.clamp(0, num_classes - 1),
            x[:0],
            y[:0],
            num_classes,
            d,
            maps.map_dim(self.cfg.release, d),
            maps.release_dim(self.cfg.release, d, num_classes),
            list(texts),
            [],
            docs,
            None if docs is None else replace(docs, emb=docs.emb[:0], offsets=np.zeros(1, dtype=np.int64)),
            word_counts(list(texts)) if self.level == "word" else None,
            np.zeros(0, dtype=np.int64) if self.level == "word" else None,
        )
        # A node of its own whose secret is ``seed``, drawing each row once, with no budget to refuse it.
        drawing = replace(self.spec.release, noise_seed=int(seed), fresh_noise_per_round=False, max_epsilon=0.0)
        spec = replace(self.spec, release=drawing)
        channels = make_channels(spec, cohort.map_dim, self.setup, num_classes)
        out = release(NodeState(), spec, "train", cohort, rows, channels, self.state.matrix)
        return np.asarray(out.emb, dtype=np.float32)


# ---------------------------------------------------------------------------- one run
def _load_run(folder: Path) -> tuple[Any, AttackState]:
    from simulations.runtime.api import resolve_config

    raw = json.loads((folder / "config.json").read_text())
    return resolve_config(raw["config"], {}), AttackState.load(folder)


def _rows(split: Any, rows: Sequence[int] | np.ndarray) -> tuple[list[str], np.ndarray]:
    """Texts and labels of these rows of a dataset split, in that order."""
    sub = split.select([int(i) for i in rows])
    return list(sub["text"]), np.asarray(sub["label"], dtype=np.int64)


def _sample(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.permutation(n)[: min(n, k)])


def _nonmembers(
    cfg: Any, ds: Any, state: AttackState, k: int, rng: np.random.Generator
) -> tuple[list[str], np.ndarray, str]:
    """Up to ``k`` documents the model never learnt from, from the members' distribution.

    The training split's rows outside the run's subsample (and outside its public split), when the
    run subsampled it; else, in the local mode, its training documents that were never released;
    else the test split, which may differ in distribution (SST-2: phrases vs whole sentences) and
    then measures that difference too (said in ``nonmembers_are``).
    """
    from fl.data import datasets as data

    seen = set(ds.train["text"]) | (set(ds.public["text"]) if ds.public is not None else set())
    if cfg["train-size"] > 0:
        whole = replace(cfg.data, train_size=0, public_fraction=0.0, empty_documents="drop")
        full = data.load(whole, cfg.users, cfg.release.level).train
        rows = [i for i in rng.permutation(len(full)).tolist() if full[i]["text"] not in seen][:k]
        if len(rows) >= min(k, 50):
            texts, labels = _rows(full, rows)
            return texts, labels, "training-split documents outside the run's subsample (same distribution)"
    unused = np.setdiff1d(np.arange(len(ds.train)), state.members)
    if unused.size >= min(k, 50):
        texts, labels = _rows(ds.train, unused[_sample(unused.size, k, rng)])
        return texts, labels, "training documents never released (same distribution)"
    texts, labels = _rows(ds.test, _sample(len(ds.test), k, rng))
    return texts, labels, "test documents (WARNING: may differ in distribution from the members)"


def _train_shadow(
    pipe: Pipeline, texts: list[str], labels: np.ndarray, i: int, seed: int, central: bool
) -> torch.nn.Module:
    """One shadow: the server's recipe on a seeded half of the public documents, released with fresh noise
    (central mode: their noise-free inputs, the attacker's stand-in for DP-FedAvg)."""
    from fl.maps.pipeline import build_model, train_epochs

    cfg, st = pipe.cfg, pipe.state
    rng = np.random.default_rng([seed, i])
    half = np.sort(rng.permutation(len(texts))[: max(2, len(texts) // 2)])
    sub = [texts[j] for j in half]
    x = pipe.clean(sub).numpy() if central else pipe.releases(sub, labels[half], seed=10_000 * (seed + 1) + i)
    model = build_model(st.m_prime, st.d, st.num_classes, hidden_dim=cfg.server.hidden_dim, seed=int(seed) * 1000 + i)
    opt = torch.optim.Adam(model.parameters(), lr=float(cfg["learning-rate"]))
    epochs = int(cfg["server-epochs"]) * int(cfg["num-server-rounds"])
    gen = torch.Generator().manual_seed(int(seed) * 1000 + i)
    train_epochs(model, opt, torch.as_tensor(x), torch.as_tensor(labels[half]), epochs, int(cfg["batch-size"]), gen)
    return model


def attack_run(
    folder: str | Path,
    attacks: Sequence[str] = ATTACKS,
    *,
    seed: int = 0,
    targets: int = 1000,
    shadows: int = 8,
    attribute_aux: int = 2000,
    attribute_victims: int = 1000,
    inversion_aux: int = 4000,
) -> dict[str, Any]:
    """Run ``attacks`` on one results folder; writes ``attacks.json`` there and returns its content."""
    from fl.data import datasets as data

    folder = Path(folder)
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {unknown}; choose from {ATTACKS}")
    started = time.perf_counter()
    cfg, state = _load_run(folder)
    central = not releases_embeddings(cfg)  # central modes: nodes send model updates, never embeddings
    pipe = Pipeline(cfg, state)
    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"run": str(folder), "seed": seed, "members_are": state.members_are, "attacks": {}}
    model = state.model()
    steps = ("mia" in attacks or "lira" in attacks) + ("lira" in attacks) * shadows
    steps += ("attribute" in attacks) + ("inversion" in attacks)
    bar = progress_bar(total=steps, desc=f"attacks on {folder.name}", unit="steps", leave=False)

    if "mia" in attacks or "lira" in attacks:
        members = state.members[_sample(state.members.size, targets, rng)]
        m_text, m_y = _rows(ds.train, members)
        o_text, o_y, out["nonmembers_are"] = _nonmembers(cfg, ds, state, targets, rng)
        m_x, o_x = pipe.clean(m_text), pipe.clean(o_text)
        m_p, o_p = mia.probabilities(model, m_x), mia.probabilities(model, o_x)
        if "mia" in attacks:
            out["attacks"]["mia"] = [r.to_dict() for r in mia.threshold_attacks(m_p, m_y, o_p, o_y, seed)]
        bar.update(1)
        if "lira" in attacks:
            pub = ds.public
            if pub is None or len(pub) < 8:
                out["attacks"]["lira"] = {
                    "not_applicable": "needs a public split (public-fraction > 0) to train shadows"
                }
            else:
                p_text, p_y = list(pub["text"]), np.asarray(pub["label"], dtype=np.int64)
                shadow_models = []
                for i in range(shadows):
                    shadow_models.append(_train_shadow(pipe, p_text, p_y, i, seed, central))
                    bar.update(1)
                sm = np.stack([mia.logit_confidence(mia.probabilities(s, m_x), m_y) for s in shadow_models])
                so = np.stack([mia.logit_confidence(mia.probabilities(s, o_x), o_y) for s in shadow_models])
                result = mia.lira_offline(mia.logit_confidence(m_p, m_y), mia.logit_confidence(o_p, o_y), sm, so, seed)
                out["attacks"]["lira"] = {**result.to_dict(), "shadows": shadows, "shadow_data": "public split"}

    no_release = "central mode releases no per-user embedding (nodes send clipped, noised model updates)"
    if "attribute" in attacks:
        if central:
            out["attacks"]["attribute"] = {"not_applicable": no_release}
        else:
            out["attacks"]["attribute"] = _attribute(pipe, attribute_aux, attribute_victims, seed)
        bar.update(1)
    if "inversion" in attacks:
        if central:
            out["attacks"]["inversion"] = {"not_applicable": no_release}
        else:
            out["attacks"]["inversion"] = _inversion(pipe, ds, targets, inversion_aux, seed)
        bar.update(1)
    bar.close()
    out["seconds"] = round(time.perf_counter() - started, 1)
    path = folder / "attacks.json"
    if path.is_file():  # attacks not re-run this time keep their earlier results
        earlier = json.loads(path.read_text())
        out = {**earlier, **out, "attacks": {**earlier.get("attacks", {}), **out["attacks"]}}
    path.write_text(json.dumps(out, indent=2))
    return out


def _attribute(pipe: Pipeline, n_aux: int, n_victims: int, seed: int) -> dict[str, Any]:
    """20 Newsgroups group from releases of posts (module docstring)."""
    from fl.data import datasets as data

    news_data = replace(
        pipe.cfg.data,
        dataset=ATTRIBUTE_DATASET,
        train_size=0,
        test_size=0,
        public_fraction=0.0,
        empty_documents="drop",
    )
    news = data.load(news_data, pipe.cfg.users, pipe.cfg.release.level)
    rng = np.random.default_rng([seed, 17])
    pool = news.train
    order = rng.permutation(len(pool))
    aux_rows, vic_rows = order[:n_aux], order[n_aux : n_aux + n_victims]
    aux_text, aux_y = _rows(pool, aux_rows)
    vic_text, vic_y = _rows(pool, vic_rows)
    # the run's model labels are not the newsgroups': releases do not depend on labels (labels ride apart)
    aux_x = pipe.releases(aux_text, np.zeros(len(aux_text), dtype=np.int64), seed=7_000 + seed)
    vic_x = pipe.releases(vic_text, np.zeros(len(vic_text), dtype=np.int64), seed=8_000 + seed)
    res = attribute_mod.attribute_attack(aux_x, aux_y, vic_x, vic_y, news.num_classes, "20 Newsgroups group", seed)
    return res.to_dict()


def _inversion(pipe: Pipeline, ds: Any, n_victims: int, n_aux: int, seed: int) -> dict[str, Any]:
    """Words of test documents from their releases (module docstring)."""
    rng = np.random.default_rng([seed, 23])
    pub = ds.public
    if pub is not None and len(pub) >= 100:
        aux_src, source = pub, "the run's public split"
    else:
        aux_src, source = ds.train, "training documents (no public split: an upper bound on what public text gives)"
    aux_rows = _sample(len(aux_src), n_aux, rng)
    vic_rows = _sample(len(ds.test), n_victims, rng)
    aux_text = _rows(aux_src, aux_rows)[0]
    vic_text = _rows(ds.test, vic_rows)[0]
    zeros = np.zeros
    aux_x = pipe.releases(aux_text, zeros(len(aux_text), dtype=np.int64), seed=5_000 + seed)
    vic_x = pipe.releases(vic_text, zeros(len(vic_text), dtype=np.int64), seed=6_000 + seed)
    pool_text = aux_text + vic_text
    pool_clean = pipe.clean(pool_text).numpy()
    truth = np.arange(len(aux_text), len(pool_text))
    res = inversion_mod.inversion_attack(aux_x, aux_text, vic_x, vic_text, pool_clean, truth, seed=seed)
    return {**res.to_dict(), "aux_source": source}


# ---------------------------------------------------------------------------- folders of runs
def run_folders(folder: Path) -> list[Path]:
    """The run folders under ``folder`` (itself when it is one): those with a summary and an attack state."""
    if (folder / "summary.json").is_file():
        return [folder]
    return sorted(p.parent for p in folder.glob("*/summary.json") if (p.parent / "attack" / "state.pt").is_file())


def headline(result: Mapping[str, Any]) -> dict[str, Any]:
    """One CSV row's attack figures: the best threshold MIA, LiRA, attribute and inversion."""
    row: dict[str, Any] = {}
    a = result["attacks"]
    if "mia" in a:
        best = max(a["mia"], key=lambda r: r["success"])
        row.update({"mia_success": best["success"], "mia_tpr_at_1pct_fpr": max(r["tpr_at_1pct_fpr"] for r in a["mia"])})
        row["mia_best_score"] = best["attack"]
    if "lira" in a and "success" in a["lira"]:
        row.update({"lira_success": a["lira"]["success"], "lira_tpr_at_1pct_fpr": a["lira"]["tpr_at_1pct_fpr"]})
    if "attribute" in a and "accuracy" in a["attribute"]:
        row.update(
            {"attribute_accuracy": a["attribute"]["accuracy"], "attribute_chance": a["attribute"]["majority_rate"]}
        )
    if "inversion" in a and "f1" in a["inversion"]:
        inv = a["inversion"]
        row.update(
            {
                "inversion_f1": inv["f1"],
                "inversion_exact": inv["exact_recovery"],
                "inversion_chance": inv["chance_recovery"],
            }
        )
    return row


def attack_folder(folder: str | Path, attacks: Sequence[str] = ATTACKS, **kw: Any) -> list[dict[str, Any]]:
    """Attack every run under ``folder``; writes ``attacks.csv`` (+ ``attacks_vs_epsilon.png`` for several runs)."""
    folder = Path(folder)
    runs = run_folders(folder)
    if not runs:
        raise FileNotFoundError(f"no completed run with an attack state under {folder}")
    rows = []
    for run in progress_bar(runs, desc=f"attacking {len(runs)} run(s)", unit="runs"):
        result = attack_run(run, attacks, **kw)
        summary = json.loads((run / "summary.json").read_text())
        cfg = json.loads((run / "config.json").read_text())["config"]
        rows.append({"run": run.name, **_run_facts(cfg, summary), **headline(result)})
    write_csv(folder / "attacks.csv", rows, columns_of(rows))
    write_markdown(folder)
    if len(rows) > 1:
        plot_attacks(rows, folder / "attacks_vs_epsilon.png")
    return rows


MD_COLUMNS = (
    "mode",
    "mechanism",
    "sentence-epsilon",
    "per_user_epsilon",
    "accuracy",
    "mia_success",
    "mia_tpr_at_1pct_fpr",
    "lira_success",
    "lira_tpr_at_1pct_fpr",
    "attribute_accuracy",
    "attribute_chance",
    "inversion_f1",
    "inversion_exact",
    "inversion_chance",
)


def write_markdown(folder: str | Path) -> Path:
    """``attacks.md``: the headline columns of ``attacks.csv``, numbers rounded, sorted by mode and epsilon."""
    from simulations.outputs.writers import markdown_table

    folder = Path(folder)
    rows = read_csv(folder / "attacks.csv")

    def show(v: str) -> str:
        try:
            return f"{float(v):.3f}" if v not in ("", "None") else ""
        except ValueError:
            return v

    def order(r: Mapping[str, str]) -> tuple:
        eps = r.get("per_user_epsilon") or ""
        return (r.get("mode", ""), r.get("mechanism", ""), float(eps) if eps not in ("", "None") else -1.0)

    shown = [{c: show(r.get(c, "")) for c in MD_COLUMNS} for r in sorted(rows, key=order)]
    path = folder / "attacks.md"
    path.write_text("\n".join(markdown_table(shown, MD_COLUMNS)) + "\n")
    return path


def releases_embeddings(cfg: Mapping[str, Any]) -> bool:
    """Whether the run's mode has its users release (sanitized) embeddings (``strategies.modes``)."""
    from fl.config import mode_name
    from strategies.modes import MODES

    return MODES[mode_name(cfg)].releases_embeddings


def _run_facts(cfg: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    privacy = summary.get("privacy", {})
    local = releases_embeddings(cfg)  # a central run's sentence-epsilon is a config value that means nothing
    return {
        "mode": cfg.get("mode"),
        "mechanism": cfg.get("sentence-mechanism") if local else "central",
        "sentence-epsilon": cfg.get("sentence-epsilon") if local else None,
        "seed": cfg.get("seed"),
        "per_user_epsilon": privacy.get("epsilon_ldp") if local else privacy.get("epsilon"),
        "accuracy": summary.get("final", {}).get("accuracy"),
    }


def plot_attacks(rows: list[dict[str, Any]], path: Path) -> None:
    """Accuracy and attack success vs per-user epsilon, side by side, one line per mechanism."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r.get("mechanism")), []).append(r)
    for name, rs in groups.items():
        rs = [r for r in rs if r.get("per_user_epsilon") not in (None, float("inf"))]
        rs.sort(key=lambda r: r["per_user_epsilon"])
        xs = [r["per_user_epsilon"] for r in rs]
        axes[0].plot(xs, [r.get("accuracy") for r in rs], "o-", label=name)
        if rs and "mia_success" in rs[0]:
            axes[1].plot(xs, [r.get("mia_success") for r in rs], "o-", label=f"{name}: MIA success")
        if rs and "lira_success" in rs[0]:
            axes[1].plot(xs, [r.get("lira_success") for r in rs], "s--", label=f"{name}: LiRA success")
    axes[0].set(xlabel="per-user epsilon", ylabel="accuracy", title="utility")
    axes[1].axhline(0.5, color="grey", lw=0.8, ls=":", label="chance")
    axes[1].set(xlabel="per-user epsilon", ylabel="attack success (balanced accuracy)", title="membership inference")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
