"""The strategy a run config names, its options checked against its constructor, in the mode it can run in.

``strategy`` takes

* ``""``: Sanitas' own (local mode: :class:`~strategies.local.release_training.ReleaseTraining`, trained on
  the server; central mode: DP-FedAvg with ``server-optimizer``);
* a Flower built-in by its class name (``"FedAdam"``), ``"package.module:Class"`` or
  ``"path/to/file.py:Class"`` (beside the config file, then the working directory: ``fl.config.plugins``);
* from Python, a class or a factory (``simulations.run(..., strategy=MyStrategy)``), named in the config as
  ``python:Name#n`` for the process it was handed to (:func:`object_spec`).

Its constructor arguments come from ``strategy-options`` (``"eta = 0.01, beta_1 = 0.9"``), each checked
against the constructor's signature and annotations before any work (:func:`check_strategy`).

What each shape is in each mode (:func:`role`):

* ``release``: a ``ReleaseTraining`` subclass: local mode, trained on the server, built with ``cfg``;
* ``wrapper``: a Flower ``Strategy`` whose constructor takes ``strategy`` (and its own options): local mode,
  around a ``ReleaseTraining``;
* ``aggregator``: any other Flower ``Strategy`` (FedAvg, FedAdam, Krum, a user's own): it aggregates model
  updates. Local mode trains on the nodes over their own users' releases and the strategy aggregates the
  nodes' models (:class:`~strategies.local.node_training.NodeTraining`); central mode runs it only when its
  aggregate is a mean (:data:`MEAN_STRATEGIES`, or a class that declares ``aggregate_is_mean = True``): the DP
  step's noisy mean is its input (:class:`~strategies.mean_step.MeanStep`).

Flower's DP wrappers are refused in both modes: the run applies DP itself.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fl.config import ConfigError, RunConfig
from fl.config.values import check_option_types, mechanism_options
from mechanisms import user_code
from mechanisms.suggest import did_you_mean

#: Flower's strategies whose aggregate is a (weighted) mean of the nodes' models, followed by a server step:
#: central mode's noisy mean can be their input.
MEAN_STRATEGIES = ("FedAvg", "FedAvgM", "FedAdam", "FedYogi", "FedAdagrad", "FedProx")
#: Flower's strategies that aggregate otherwise, and what: their sensitivity is not the clipped mean's.
NOT_A_MEAN = {
    "FedMedian": "a coordinate-wise median",
    "FedTrimmedAvg": "a trimmed mean",
    "Krum": "the one update nearest its neighbours",
    "MultiKrum": "a mean of the updates Krum selects",
    "Bulyan": "a trimmed mean of the updates Krum selects",
    "QFedAvg": "a loss-weighted q-fair step",
}
#: Flower's DP wrappers: their place is taken by the run's own DP (local sanitizers, or central-* keys).
DP_WRAPPERS = (
    "DifferentialPrivacyServerSideFixedClipping",
    "DifferentialPrivacyClientSideFixedClipping",
    "DifferentialPrivacyServerSideAdaptiveClipping",
    "DifferentialPrivacyClientSideAdaptiveClipping",
)
#: Flower's strategies for other model families (XGBoost trees): nothing here trains trees.
NOT_FOR_TEXT = ("FedXgbBagging", "FedXgbCyclic")
#: Constructor arguments Sanitas fills when the options leave them out: the strategy samples among the nodes
#: that hold training users (one suffices) and never evaluates (Sanitas' evaluation scores every test user).
NODE_DEFAULTS = {"min_available_nodes": 1, "min_train_nodes": 1, "min_evaluate_nodes": 0}
#: Required arguments Sanitas supplies from the run config: QFedAvg's ``client_learning_rate`` (its Lipschitz
#: estimate L = 1 / lr assumes the nodes' plain SGD step; the nodes here take Adam steps at ``learning-rate``, so
#: L is an estimate: set it in strategy-options to tune q-FFL's step).
SUPPLIED: dict[str, Callable[[RunConfig], Any]] = {"client_learning_rate": lambda cfg: cfg.server.learning_rate}

#: Sanitas' own local strategy, the base of a ``release`` class.
RELEASE_TRAINING = "strategies.local.release_training.ReleaseTraining"
#: Constructor arguments Sanitas passes itself: the wrapped strategy, a ReleaseTraining's config and timeout.
BUILT_BY_SANITAS = ("strategy", "cfg", "timeout")

#: Objects handed to simulations.run in this process: ``python:Name#n`` -> class or factory.
_OBJECTS: dict[str, Any] = {}


def object_spec(obj: Any) -> str:
    """The ``strategy`` value naming a class or factory handed over from Python: ``module:Name`` when it is
    importable by that name (so sweeps' workers load it too), else ``python:Name#n``, valid in this process."""
    module, name = getattr(obj, "__module__", ""), getattr(obj, "__qualname__", "")
    if module and module != "__main__" and name.isidentifier():
        try:
            if user_code.load(f"{module}:{name}", "strategy") is obj:
                return f"{module}:{name}"
        except ValueError:
            pass
    shown = re.sub(r"\W", "_", getattr(obj, "__name__", "strategy"))  # a lambda's "<lambda>" as a name
    spec = f"python:{shown}#{len(_OBJECTS) + 1}"
    _OBJECTS[spec] = obj
    return spec


def _flower_builtins() -> dict[str, Any]:
    import flwr.serverapp.strategy as flower

    return {n: getattr(flower, n) for n in flower.__all__ if n not in ("Result", "Strategy")}


def load_target(spec: str) -> Any:
    """The class or factory ``spec`` names (one ``ValueError`` line otherwise)."""
    if spec in _OBJECTS:
        return _OBJECTS[spec]
    if spec.startswith("python:"):
        raise ValueError(
            f"strategy = {spec!r} was handed to simulations.run in another process: name it as 'module:Class'"
        )
    if spec.isidentifier():
        builtins = _flower_builtins()
        if spec not in builtins:
            hint = did_you_mean(spec, list(builtins))
            raise ValueError(
                f"strategy = {spec!r} is not one of Flower's strategies{hint}; a class of your own is "
                "'package.module:Class' or 'path/to/file.py:Class'"
            )
        return builtins[spec]
    return user_code.load(spec, "strategy")


@dataclass(frozen=True)
class Choice:
    """A strategy as a run config names it: what to build, with which options, in which role."""

    spec: str
    target: Any  # a class, or a factory returning a Strategy
    options: dict[str, Any] = field(default_factory=dict)
    role: str = "aggregator"  # "release" | "wrapper" | "aggregator"

    @property
    def name(self) -> str:
        """The strategy's name in summaries, tables and plots."""
        return getattr(self.target, "__name__", self.spec)

    @property
    def is_mean(self) -> bool:
        """Whether its aggregate is a mean of the nodes' models (central mode can run it)."""
        if getattr(self.target, "aggregate_is_mean", False) is True:
            return True
        return (
            inspect.isclass(self.target)
            and self.target.__module__.startswith("flwr.")
            and (self.target.__name__ in MEAN_STRATEGIES)
        )


def role(target: Any) -> str:
    """``"release"``, ``"wrapper"`` or ``"aggregator"`` of a class (a factory's is known once called)."""
    from flwr.serverapp.strategy import Strategy

    if not inspect.isclass(target):
        return "aggregator"
    # By its bases' names: a subclass has imported ReleaseTraining already, and the check imports no torch.
    if any(f"{c.__module__}.{c.__qualname__}" == RELEASE_TRAINING for c in target.__mro__):
        return "release"
    if not issubclass(target, Strategy):
        raise ValueError(f"strategy {target.__name__!r} is not a flwr.serverapp.strategy.Strategy")
    if "strategy" in inspect.signature(target).parameters:
        return "wrapper"
    return "aggregator"


def _check_options(target: Any, options: Mapping[str, Any], name: str) -> None:
    """Each option a parameter of ``target``'s constructor (or factory) with a value of its annotated type,
    and every required parameter given or supplied (one ``ConfigError`` line naming the option)."""
    params = inspect.signature(target).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for option in options:
        if option not in named and not takes_any:
            hint = did_you_mean(option, named) or f" (it takes: {', '.join(named)})"
            line = f"strategy-options: {name} takes no {option!r}{hint}"
            raise ConfigError(line if len(line) <= 180 else line[:176] + "...)")
        if option in BUILT_BY_SANITAS:
            raise ConfigError(
                f"strategy-options: {option!r} is given by Sanitas (the wrapped strategy or the run config)"
            )
    check_option_types(target, options, "strategy-options")
    missing = [
        k
        for k, p in params.items()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and k not in options
        and k not in SUPPLIED
        and k not in BUILT_BY_SANITAS
    ]
    if missing:
        raise ConfigError(
            f"strategy-options: {name} needs {', '.join(missing)} (e.g. strategy-options = '{missing[0]} = ...')"
        )


def choose(cfg: RunConfig) -> Choice | None:
    """The configured strategy, loaded and its options checked against its constructor (``None``: Sanitas'
    own). Raises a one-line ``ValueError`` / ``ConfigError``; imports Flower but starts nothing."""
    spec = cfg.server.strategy
    if not spec:
        return None
    target = load_target(spec)
    name = getattr(target, "__name__", spec)
    if name in DP_WRAPPERS and getattr(target, "__module__", "").startswith("flwr."):
        raise ConfigError(dp_wrapper_answer(name, cfg))
    if name in NOT_FOR_TEXT and getattr(target, "__module__", "").startswith("flwr."):
        raise ConfigError(f"strategy = {spec!r} aggregates XGBoost trees; Sanitas trains neural models on releases")
    if not callable(target):
        raise ValueError(f"strategy = {spec!r} names {type(target).__name__}, not a class or a factory")
    options = mechanism_options(cfg.server.strategy_options, "strategy-options")
    _check_options(target, options, name)
    _check_values(options)
    return Choice(spec, target, options, role(target))


def _check_values(options: Mapping[str, Any]) -> None:
    """Flower's common arguments within what a run can do: a fraction in (0, 1] (Flower's ``fraction_train`` samples
    nodes; Sanitas' ``fraction-train`` samples users), node minimums of at least 1 (their upper bound is the
    federation's, checked when the nodes are known), a proximal term of at least 0."""
    for key in ("fraction_train", "fraction_evaluate"):
        if key in options and not 0 < float(options[key]) <= 1:
            raise ConfigError(f"strategy-options: {key} = {options[key]!r} must lie in (0, 1] (of the nodes)")
    for key in ("min_train_nodes", "min_available_nodes"):
        if key in options and int(options[key]) < 1:
            raise ConfigError(f"strategy-options: {key} = {options[key]!r} must be >= 1")
    if "proximal_mu" in options and float(options["proximal_mu"]) < 0:
        raise ConfigError(f"strategy-options: proximal_mu = {options['proximal_mu']!r} must be >= 0")


def dp_wrapper_answer(name: str, cfg: RunConfig) -> str:
    """Why a Flower DP wrapper is not named here, and which keys set the run's own DP."""
    if cfg["mode"] == "local":
        return (
            f"strategy = {name!r}: the run already applies DP (local sanitizers); for central DP: "
            "mode = 'central', central-clip, central-noise-multiplier"
        )
    return (
        f"strategy = {name!r}: the run already applies DP (DP-FedAvg): set central-clip, "
        "central-noise-multiplier, central-clipping"
    )


def check_strategy(cfg: RunConfig, mode: str | None = None) -> Choice | None:
    """:func:`choose`, then whether the run's mode can run it (before any work; one line otherwise):
    central mode runs a mean-family aggregator only; local mode trains an aggregator on the nodes, which
    needs a model the nodes can train (``server-model = "mlp"``, one cohort, M1 not ``leaky``). ``mode``: the
    mode to check for (default: the config's; ``sanitas compare`` checks its central side's config as central)."""
    choice = choose(cfg)
    if choice is None:
        return None
    if (mode or cfg["mode"]) == "central":
        if choice.role != "aggregator":
            shape = "subclass" if choice.role == "release" else "wrapper"
            raise ConfigError(
                f"strategy {choice.name!r} is local-mode only (a {shape} of ReleaseTraining); central mode takes "
                f"a mean-family Flower strategy ({', '.join(MEAN_STRATEGIES)})"
            )
        if not choice.is_mean:
            what = NOT_A_MEAN.get(choice.name, "not declared a mean (set aggregate_is_mean = True if it is one)")
            raise ConfigError(
                f"strategy {choice.name!r} aggregates by {what}: its sensitivity is not the clipped mean's; run it "
                "with mode = 'local'"
            )
        above = [k for k in ("min_train_nodes", "min_available_nodes") if int(choice.options.get(k, 1)) > 1]
        if above:
            raise ConfigError(
                f"strategy-options: {above[0]} > 1 in central mode: the strategy steps from one noisy mean (the DP "
                "step samples the users or nodes); leave it out"
            )
        return choice
    if choice.role == "aggregator":
        clashes = [
            f"{k} = {cfg[k]!r}"
            for k, ok in (("server-model", "mlp"), ("cohorts", 1), ("map-in", None))
            if (cfg[k] != ok if ok is not None else cfg[k] == "leaky")
        ]
        if clashes:
            raise ConfigError(
                f"strategy {choice.name!r} trains on the nodes: it needs server-model = 'mlp', cohorts = 1 and "
                f"map-in != 'leaky' (got {', '.join(clashes)})"
            )
    return choice


def build(choice: Choice, cfg: RunConfig, inner: Any = None) -> Any:
    """The strategy object: a ``release`` class built with ``cfg``; a ``wrapper`` around ``inner`` with its
    options; an ``aggregator`` with its options, :data:`NODE_DEFAULTS` and :data:`SUPPLIED` where its
    constructor takes them and the options leave them out."""
    from flwr.serverapp.strategy import Strategy

    if choice.role == "release":
        return choice.target(cfg, **choice.options)
    if choice.role == "wrapper":
        return choice.target(strategy=inner, **choice.options)
    params = inspect.signature(choice.target).parameters
    filled = {k: v for k, v in NODE_DEFAULTS.items() if k in params and k not in choice.options}
    filled.update({k: f(cfg) for k, f in SUPPLIED.items() if k in params and k not in choice.options})
    built = choice.target(**filled, **choice.options)
    if not isinstance(built, Strategy):
        raise TypeError(f"strategy {choice.spec!r} returned {type(built).__name__}, not a Flower Strategy")
    return built


def make_strategy(cfg: RunConfig) -> Any:
    """Local mode's strategy: ``ReleaseTraining`` (``strategy`` empty), a subclass, a wrapper around one, or
    (a Flower strategy that aggregates models) :class:`~strategies.local.node_training.NodeTraining` around
    it. The ServerApp puts ``LocalDPAccounting`` around whatever this returns, so no configured strategy can
    skip the accounting."""
    from strategies.local.release_training import ReleaseTraining

    choice = check_strategy(cfg)
    if choice is None:
        return ReleaseTraining(cfg)
    if choice.role == "release":
        return build(choice, cfg)
    if choice.role == "wrapper":
        return build(choice, cfg, ReleaseTraining(cfg))
    from strategies.local.node_training import NodeTraining

    return NodeTraining(cfg, choice.name, functools.partial(build, choice, cfg))


def central_step(cfg: RunConfig) -> Any:
    """Central mode's server step: ``None`` (``server-optimizer``) or a :class:`~strategies.mean_step.MeanStep`
    around the configured mean-family strategy (checked: :func:`check_strategy`)."""
    choice = check_strategy(cfg)
    if choice is None:
        return None
    from strategies.mean_step import MeanStep

    return MeanStep(build(choice, cfg), choice.name)


__all__ = [
    "DP_WRAPPERS",
    "MEAN_STRATEGIES",
    "NOT_A_MEAN",
    "Choice",
    "build",
    "central_step",
    "check_strategy",
    "choose",
    "load_target",
    "make_strategy",
    "object_spec",
    "role",
]
