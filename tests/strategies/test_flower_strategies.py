"""Flower's strategies and a user's own, named in the run config, in both modes.

Local mode: every Flower strategy that aggregates models trains on the nodes over their releases
(``strategies.local.node_training``) with the ledger of the same run trained on the server. Central mode: the
mean family steps the model from the DP step's noisy mean (``strategies.mean_step``), with the accounting
unchanged, and FedAvg through that step is the default step exactly; every other strategy, and Flower's DP
wrappers, are refused before any work, in one line.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from strategies.loading import DP_WRAPPERS, MEAN_STRATEGIES, NOT_A_MEAN
from tests.support.runs import SMALL_RUN

#: Every Flower strategy the issue names: the mean family and the robust / fair aggregators.
FLOWER = (*MEAN_STRATEGIES, *NOT_A_MEAN)
#: Required or telling options per strategy (the rest take Flower's defaults).
OPTIONS = {"FedProx": "proximal_mu = 0.1"}
#: Six nodes of 10 training users (Bulyan needs n >= 4f + 3 nodes), RR labels.
LOCAL = {**SMALL_RUN, "users-per-node": 10, "label-mechanism": "rr", "label-epsilon": 2.0}
CENTRAL = {
    "user": {
        "mode": "central",
        "central-unit": "user",
        "central-cohort-size": 20.0,
        "central-noise-multiplier": 1.0,
        "central-clip": 1.0,
    },
    "node": {"mode": "central", "central-unit": "node", "central-noise-multiplier": 0.5, "central-clip": 1.0},
}


def _run(out: Path, data_dir: Path, name: str, **keys: Any) -> dict[str, Any]:
    import simulations

    config = {**LOCAL, "data-dir": str(data_dir), **{k.replace("_", "-"): v for k, v in keys.items()}}
    return simulations.run(config, out=out, run_name=name).summary


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, dict[str, Any]]:
    """The small local run trained on the server, and under each Flower strategy on the nodes."""
    out = tmp_path_factory.mktemp("flower-local")
    runs = {"": _run(out, data_dir, "server")}
    for name in FLOWER:
        runs[name] = _run(out, data_dir, name, strategy=name, strategy_options=OPTIONS.get(name, ""))
    return runs


def _ledger(summary: dict[str, Any]) -> dict[str, Any]:
    """The run's privacy block: what the ledger charged and the epsilon it prints."""
    return {k: v for k, v in summary["privacy"].items() if "second" not in k}


@pytest.mark.parametrize("name", FLOWER)
def test_every_flower_strategy_trains_on_the_nodes_with_the_server_runs_ledger(
    name: str, local_runs: dict[str, dict[str, Any]]
) -> None:
    summary, server = local_runs[name], local_runs[""]
    assert (summary["strategy"], summary["trained_on"]) == (name, "nodes")
    assert (server["strategy"], server["trained_on"]) == ("ReleaseTraining", "server")
    accuracy = summary["final"]["accuracy"]
    print(f"{name}: accuracy {accuracy:.3f} (trained on the server: {server['final']['accuracy']:.3f})")
    assert 0.0 <= accuracy <= 1.0
    # The same users released the same charges: the same ledger, epsilon and guarantee line.
    assert _ledger(summary) == _ledger(server)
    assert summary["guarantee"]["sentence"]["text"] == server["guarantee"]["sentence"]["text"]
    assert summary["ldp_guarantee_holds"] is True


@pytest.fixture(scope="module")
def central_runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Each unit's default run, and each mean-family strategy at that unit."""
    out = tmp_path_factory.mktemp("flower-central")
    runs = {}
    for unit, keys in CENTRAL.items():
        runs[unit, ""] = _run(out, data_dir, f"{unit}-default", **keys)
        for name in MEAN_STRATEGIES:
            opts = OPTIONS.get(name, "")
            runs[unit, name] = _run(out, data_dir, f"{unit}-{name}", **keys, strategy=name, strategy_options=opts)
    runs["user", "sgd"] = _run(
        out, data_dir, "user-sgd", **CENTRAL["user"], server_optimizer="sgd", server_learning_rate=1.0
    )
    return runs


@pytest.mark.parametrize("unit", sorted(CENTRAL))
@pytest.mark.parametrize("name", MEAN_STRATEGIES)
def test_the_mean_family_steps_from_the_noisy_mean_with_the_accounting_unchanged(
    unit: str, name: str, central_runs: dict[tuple[str, str], dict[str, Any]]
) -> None:
    summary, default = central_runs[unit, name], central_runs[unit, ""]
    assert summary["server_step"] == name
    print(f"{unit} level, {name}: accuracy {summary['final']['accuracy']:.3f}")
    assert summary["privacy"]["epsilon"] == default["privacy"]["epsilon"]
    assert summary["guarantee"]["central"]["text"] == default["guarantee"]["central"]["text"]


def test_fedavg_through_the_mean_step_is_the_default_step(central_runs: dict[tuple[str, str], Any]) -> None:
    """Node level: FedAvg's step from the noisy mean is the noisy mean (the default); user level: it is SGD at
    step size 1 on the noisy mean update."""
    assert central_runs["node", "FedAvg"]["final"] == central_runs["node", ""]["final"]
    assert central_runs["user", "FedAvg"]["final"] == central_runs["user", "sgd"]["final"]


# ------------------------------------------------------------------ refusals, before any work
def _refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str], *sets: str) -> str:
    from simulations import cli

    config = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "quickstart.toml"
    out = tmp_path / "out"
    argv = ["run", str(config), "--out", str(out)]
    for item in sets:
        argv += ["--set", item]
    code = cli.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and len(err[0]) <= 200, err
    assert not out.exists() or not any(out.iterdir())  # no run folder
    return err[0]


@pytest.mark.parametrize("unit", ["user", "node"])
@pytest.mark.parametrize("name", sorted(NOT_A_MEAN))
def test_central_mode_refuses_what_is_not_a_mean_saying_why(
    name: str, unit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    central = ('mode="central"', f'central-unit="{unit}"', 'map-in="random"')
    line = _refusal(tmp_path, capsys, *central, f'strategy="{name}"')
    assert name in line and "sensitivity is not the clipped mean's" in line and "mode = 'local'" in line


@pytest.mark.parametrize("mode", ["local", "central"])
@pytest.mark.parametrize("name", DP_WRAPPERS)
def test_a_flower_dp_wrapper_gets_a_clear_answer(
    name: str, mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(tmp_path, capsys, f'mode="{mode}"', 'map-in="random"', f'strategy="{name}"')
    assert "already applies DP" in line and "central-noise-multiplier" in line


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (['strategy="FedAdam"', 'strategy-options="etta = 0.1"'], "takes no 'etta'; did you mean 'eta'?"),
        (['strategy="FedAdam"', 'strategy-options="eta = \\"big\\""'], "eta = 'big' must be a number"),
        (['strategy="FedAdm"'], "did you mean 'FedAdam'"),
        (['strategy="nowhere.py:Thing"'], "no file 'nowhere.py'"),
        (['strategy="FedXgbBagging"'], "XGBoost"),
        (['strategy-options="eta = 0.1"'], "strategy is empty"),
        (['strategy="FedAvg"', 'server-model="class-means"'], "trains on the nodes"),
        (
            ['mode="central"', 'map-in="random"', 'strategy="strategies.local.release_training:ReleaseTraining"'],
            "local-mode only (a subclass of ReleaseTraining)",
        ),
    ],
)
def test_a_bad_strategy_or_option_is_one_line(
    sets: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert words in _refusal(tmp_path, capsys, *sets)


# ------------------------------------------------------------------ a user's strategies
USER_STRATEGIES = '''
import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import FedAvg, Strategy

from strategies import ReleaseTraining


class DampedFedAvg(FedAvg):
    """FedAvg moving only `damping` of the way to the nodes' average."""

    def __init__(self, damping: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.damping = damping

    def configure_train(self, server_round, arrays, config, grid):
        self.current = arrays
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        mixed = {k: self.current[k].numpy() + self.damping * (arrays[k].numpy() - self.current[k].numpy())
                 for k in arrays}
        return ArrayRecord({k: Array(np.asarray(v, dtype=np.float32)) for k, v in mixed.items()}), metrics


class EveryOtherUser(ReleaseTraining):
    """Only the users whose id is a multiple of `every` release."""

    def __init__(self, cfg, every: int = 2, timeout: float = 3600.0):
        super().__init__(cfg, timeout)
        self.every = every

    def sample_users(self, server_round):
        return np.arange(0, self.num_train_users, self.every)


class Tagged(Strategy):
    """A wrapper with an option of its own."""

    def __init__(self, strategy, tag: str = "none"):
        self.strategy, self.tag = strategy, tag

    def configure_train(self, *args):
        return self.strategy.configure_train(*args)

    def aggregate_train(self, *args):
        return self.strategy.aggregate_train(*args)

    def configure_evaluate(self, *args):
        return self.strategy.configure_evaluate(*args)

    def aggregate_evaluate(self, *args):
        return self.strategy.aggregate_evaluate(*args)

    def summary(self):
        self.strategy.summary()
'''


@pytest.fixture
def user_file(tmp_path: Path, data_dir: Path) -> Path:
    """A config folder holding the user's strategies and a config naming them by a relative path."""
    folder = tmp_path / "experiment"
    folder.mkdir()
    (folder / "my_strategies.py").write_text(textwrap.dedent(USER_STRATEGIES))
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in LOCAL.items() if not isinstance(v, bool)]
    (folder / "config.toml").write_text("\n".join([*lines, f'data-dir = "{data_dir}"']) + "\n")
    return folder


@pytest.mark.parametrize(
    ("cls", "options", "trained_on"),
    [
        ("DampedFedAvg", "damping = 0.5", "nodes"),
        ("EveryOtherUser", "every = 3", "server"),
        ("Tagged", 'tag = "t"', "server"),
    ],
)
def test_a_strategy_from_a_file_beside_the_config_with_its_options(
    cls: str, options: str, trained_on: str, user_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from simulations import cli

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # found beside the config file, not in the working directory
    argv = ["run", str(user_file / "config.toml"), "--out", str(tmp_path / "out")]
    argv += ["--set", f'strategy="my_strategies.py:{cls}"', "--set", f"strategy-options='{options}'"]
    argv += ["--set", f'run-name="{cls}"']
    assert cli.main(argv) == 0
    summary = json.loads((tmp_path / "out" / cls / "summary.json").read_text())
    assert summary["trained_on"] == trained_on
    assert summary["strategy"] == ("DampedFedAvg" if cls == "DampedFedAvg" else cls)
    if cls == "EveryOtherUser":  # users 0, 3, 6, ... of 60 released: 20 of them
        assert summary["privacy"]["users_released"] == 20 + 40  # and the 40 test users


def test_a_class_or_a_factory_from_python(tmp_path: Path, data_dir: Path) -> None:
    from flwr.serverapp.strategy import FedAdam, FedTrimmedAvg

    import simulations

    def trimmed(beta: float = 0.2, **kwargs: Any) -> FedTrimmedAvg:
        return FedTrimmedAvg(beta=beta, **kwargs)

    config = {**LOCAL, "data-dir": str(data_dir)}
    adam = simulations.run(config, out=tmp_path, run_name="adam", strategy=FedAdam, strategy_options="eta = 0.01")
    assert adam.summary["strategy"] == "FedAdam" and adam.summary["trained_on"] == "nodes"
    factory = simulations.run(config, out=tmp_path, run_name="f", strategy=trimmed, strategy_options="beta = 0.1")
    assert factory.summary["trained_on"] == "nodes"


# ------------------------------------------------------------------ FedProx's term
def test_the_proximal_term_adds_mu_times_the_distance_to_the_global_model() -> None:
    from fl.training.proximal import ProximalOptimizer

    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = ProximalOptimizer(torch.optim.SGD([w], lr=0.5), [w], mu=0.2)
    with torch.no_grad():
        w.add_(torch.tensor([1.0, -1.0]))  # moved away from the anchor [1, 2]
    w.grad = torch.tensor([0.1, 0.1])
    opt.step()
    # w - lr * (g + mu (w - anchor)) = [2, 1] - 0.5 * ([0.1, 0.1] + 0.2 * [1, -1])
    assert torch.allclose(w.detach(), torch.tensor([2.0 - 0.5 * 0.3, 1.0 - 0.5 * (-0.1)]))


def test_user_level_updates_carry_the_proximal_term_from_the_second_step() -> None:
    from fl.training.user_updates import clipped_update_sum

    torch.manual_seed(0)  # the modules' initialisation
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(2, 5, 3, generator=g), torch.randint(0, 2, (2, 5), generator=g)
    mask = torch.ones(2, 5)
    one = [clipped_update_sum(model, x, y, mask, steps=1, lr=0.5, clip=100.0, proximal_mu=m)[0] for m in (0, 3.0)]
    two = [clipped_update_sum(model, x, y, mask, steps=2, lr=0.5, clip=100.0, proximal_mu=m)[0] for m in (0, 3.0)]
    assert all(torch.allclose(one[0][k], one[1][k]) for k in one[0])  # zero at the first step
    assert any(not torch.allclose(two[0][k], two[1][k]) for k in two[0])
    # The proximal pull shrinks the update toward the global model.
    norm = [float(np.sqrt(sum(float((v**2).sum()) for v in t.values()))) for t in two]
    assert norm[1] < norm[0]


@pytest.mark.slow
def test_training_on_the_nodes_is_the_same_on_the_ray_backend(tmp_path: Path, data_dir: Path) -> None:
    """The nodes train in Ray actors (other processes): the same releases, ledger and model as on the local
    backend (node training is seeded by the run's seed, the partition and the round)."""
    keys = {"strategy": "FedTrimmedAvg", "noise_seed": 3}
    local = _run(tmp_path, data_dir, "local", **keys, backend="local")
    ray = _run(tmp_path, data_dir, "ray", **keys, backend="ray")
    assert ray["trained_on"] == "nodes" and _ledger(ray) == _ledger(local)
    assert ray["final"] == local["final"]
