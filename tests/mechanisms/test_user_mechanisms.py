"""A user's mechanism named by ``"path/to/file.py:Class"`` or ``"package.module:Class"``: the registry loads
and checks it (``mechanisms.registry.user_class``), and the quick audit (``mechanisms.audit.quick``) checks
its declared guarantee.

Power check of the quick audit: the honest copy of planar Laplace (and of randomized response) passes, the
copy that samples at 3x its declared epsilon fails, at the quick audit's own settings (seed 0, 2e5 releases
per input, alpha = 0.001). False-refusal rate: at most alpha = 0.001 for a mechanism that meets its declared
guarantee on the audited pair (Clopper-Pearson bounds at alpha / k for its k audits, Bonferroni); the seed is
fixed, so each figure below is deterministic.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import mechanisms
from mechanisms.audit.quick import QUICK_ALPHA, audit_declared
from mechanisms.planar_laplace import PlanarLaplace
from mechanisms.registry import shown
from tests.mechanisms.user_code_mechanisms import write_mechanisms


@pytest.fixture
def source(tmp_path: Path) -> Path:
    return write_mechanisms(tmp_path)


def test_a_file_spec_is_loaded_once_checked_and_kept_out_of_the_name_registry(source: Path) -> None:
    before = mechanisms.names()
    spec = f"{source}:MyPlanar"
    cls = mechanisms.mechanism_class(spec)
    assert cls.__name__ == "MyPlanar" and cls.name == "my_planar" and cls.level == "sentence"
    assert mechanisms.mechanism_class(spec) is cls  # one import per spec and process
    mech = mechanisms.create(spec, epsilon=1.0)
    out = mech.sanitize(torch.eye(3, dtype=torch.float64), generator=torch.Generator().manual_seed(0))
    assert out.shape == (3, 3) and torch.allclose(out.norm(dim=1), torch.ones(3, dtype=torch.float64))
    assert mechanisms.names() == before and "my_planar" not in before


def test_a_user_name_that_is_a_builtin_name_replaces_nothing(source: Path) -> None:
    clash = mechanisms.mechanism_class(f"{source}:Clash")
    assert clash.name == "planar_laplace" and clash is not PlanarLaplace
    assert mechanisms.mechanism_class("planar_laplace") is PlanarLaplace


def test_a_module_spec_is_imported_as_usual(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_mechanisms(tmp_path, "user_noise_module_spec.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    mech = mechanisms.create("user_noise_module_spec:MyPlanar", epsilon=2.0)
    assert type(mech).__name__ == "MyPlanar" and mech.guarantee.epsilon == 2.0
    assert shown("user_noise_module_spec:MyPlanar") == "user_noise_module_spec:MyPlanar"


@pytest.mark.parametrize(
    ("target", "level", "expected"),
    [
        ("NoName", None, "NoName has no name: set name"),
        ("NoLevel", None, "NoLevel has level 'paragraph'"),
        ("Abstract", None, "Abstract does not implement sanitize"),
        ("NotAMechanism", None, "NotAMechanism is not a mechanism: subclass mechanisms.base.SentenceMechanism"),
        ("not_a_class", None, "function object is not a mechanism"),
        ("Missing", None, "user_noise.py defines no 'Missing'"),
        ("MyPlanar", "label", "MyPlanar is a sentence-level mechanism (level = 'sentence'): name it in sentence-"),
    ],
)
def test_a_bad_class_is_refused_in_one_line_naming_the_key(
    source: Path, target: str, level: str | None, expected: str
) -> None:
    with pytest.raises(ValueError) as err:
        mechanisms.mechanism_class(f"{source}:{target}", level=level, key="sentence-mechanism")
    text = str(err.value)
    assert text.startswith("sentence-mechanism = ") and expected in text and "\n" not in text, text


def test_a_missing_file_and_a_failing_import_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^label-mechanism = 'nope.py:X': no file 'nope.py'"):
        mechanisms.mechanism_class("nope.py:X", key="label-mechanism")
    broken = tmp_path / "broken_noise.py"
    broken.write_text("raise ImportError('needs a package this machine lacks')\n")
    with pytest.raises(ValueError, match=r"importing broken_noise.py failed: ImportError: needs a package"):
        mechanisms.mechanism_class(f"{broken}:X", key="sentence-mechanism")


def test_shown_names_a_file_spec_by_its_file(source: Path) -> None:
    assert shown(f"{source}:Loose") == "user_noise.py:Loose"
    assert shown("planar_laplace") == "planar_laplace"


# --------------------------------------------------------------------------- the quick audit
def _build(source: Path, cls: str, epsilon: float = 1.0) -> mechanisms.Mechanism:
    return mechanisms.create(f"{source}:{cls}", epsilon=epsilon)


@pytest.mark.parametrize(("honest", "loose"), [("MyPlanar", "Loose"), ("MyRR", "LooseRR")])
def test_the_quick_audit_passes_the_honest_copy_and_refuses_the_3x_one(source: Path, honest: str, loose: str) -> None:
    """The power check: at the quick audit's settings (the run's: dims 2 and 16, 2e5 releases per input,
    alpha 0.001) the honest copy passes near its declared epsilon and the 3x copy is refuted by far
    (MyPlanar 1.75 <= 2 and Loose 4.53 > 2 at dim 2; MyRR 0.99 <= 1 and LooseRR 2.98 > 1)."""
    good = audit_declared(_build(source, honest), dims=(2, 16))
    bad = audit_declared(_build(source, loose), dims=(2, 16))
    assert good.passed and good.alpha == QUICK_ALPHA, good
    assert all(r.num_samples == 200_000 and r.alpha == QUICK_ALPHA / len(good.results) for r in good.results)
    worst = good.worst
    assert worst is not None and worst.claimed_epsilon is not None
    assert 0.8 * worst.claimed_epsilon <= worst.epsilon_lb <= worst.claimed_epsilon, worst
    assert bad.failed and bad.worst is not None and bad.worst.claimed_epsilon is not None
    assert bad.worst.epsilon_lb > 2 * bad.worst.claimed_epsilon, bad.worst
    line = bad.line(f"sentence-mechanism 'user_noise.py:{loose}'")
    assert "failed its audit: declared epsilon" in line and "fix the sampler" in line and len(line) <= 184
    assert good.seconds < 30 and bad.seconds < 30


def test_the_quick_audit_is_deterministic_and_restores_torch_threads(source: Path) -> None:
    threads = torch.get_num_threads()
    first = audit_declared(_build(source, "Loose"), dims=(2,))
    assert first.results == audit_declared(_build(source, "Loose"), dims=(2,)).results
    assert torch.get_num_threads() == threads


def test_what_the_quick_audit_cannot_test_it_says(source: Path) -> None:
    """No privacy, a declared epsilon beyond what the samples can measure, too slow for the time given, a word
    mechanism without the entry points the word audit samples through: ``untested`` with the reason, never a
    pass."""
    opened = audit_declared(_build(source, "Open"))
    assert opened.status == "untested" and "declares no privacy" in opened.line("x")
    beyond = audit_declared(_build(source, "Loose", epsilon=10.0))  # declares 20 on (x, -x); 2e5 measure 9.6
    assert (
        beyond.status == "untested" and "is beyond the 9.69 that 200000 releases per input can measure" in beyond.reason
    )
    slow = audit_declared(_build(source, "MyPlanar"), seconds=1e-6)
    assert slow.status == "untested" and "would take over" in slow.reason and "audit-mechanism" in slow.reason
    from mechanisms.base import WordMechanism
    from mechanisms.guarantee import Guarantee

    class Opaque(WordMechanism):
        name = "opaque"
        space = None  # type: ignore[assignment]

        @property
        def guarantee(self) -> Guarantee:
            return Guarantee(notion="pure", epsilon=1.0, granularity="word")

        def sanitize_ids(self, ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
            return ids

    word = audit_declared(Opaque())
    assert word.status == "untested" and "the word audit needs input_vectors()" in word.reason
    assert not word.passed and not word.failed


def test_a_slow_mechanism_is_audited_on_fewer_samples_within_the_time(source: Path) -> None:
    """20 microseconds a release: 2e5 releases per input would take about 10 s; with 2 s the quick audit
    times its probes and takes a smaller step of its ladder, still seeded (a step's verdict is fixed)."""
    verdict = audit_declared(_build(source, "Slow"), seconds=2.0)
    assert verdict.passed, verdict
    (result,) = verdict.results
    assert result.num_samples in (50_000, 20_000) and verdict.seconds < 6, (result.num_samples, verdict.seconds)


def test_a_sampler_that_fails_while_audited_is_one_line(source: Path) -> None:
    with pytest.raises(ValueError, match=r"^it failed while audited: RuntimeError: boom$"):
        audit_declared(_build(source, "Failing"))


def test_a_dimension_the_mechanism_refuses_is_skipped(source: Path) -> None:
    """PrivUnit sets itself up for the first dimension it sees: each audited dimension gets a fresh copy."""
    mech = mechanisms.create("privunit", epsilon=2.0)
    verdict = audit_declared(mech, dims=(2, 8), samples=(20_000,))
    assert verdict.passed and [r.input_dim for r in verdict.results] == [2, 8]
