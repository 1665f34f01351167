"""``sanitas audit-mechanism SPEC``: the full audit of one mechanism against its declared epsilon; exit 0 when
no audit refutes it, 1 when one does, 2 on bad input (one line, before any work)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations import cli
from simulations.cli import audit_mechanism
from tests.mechanisms.user_code_mechanisms import write_mechanisms
from tests.support.cli import block_handlers


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = cli.main(["audit-mechanism", *args])
    captured = capsys.readouterr()
    return code, captured.out.strip().splitlines(), captured.err.strip().splitlines()


def test_the_honest_copy_passes_and_the_3x_copy_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_mechanisms(tmp_path)
    code, out, err = _run(capsys, f"{source}:MyPlanar", "--samples", "200000")
    assert code == 0 and not err, err
    assert out[0].startswith("audit-mechanism 'user_noise.py:MyPlanar': 1*d_euclidean-LDP per sentence")
    assert out[1].startswith("  dimension 2: measured lower bound 1.75") and "vs declared epsilon 2 " in out[1]
    assert out[2].startswith("  dimension 16: ") and "passed its privacy audit" in out[-1]
    code, out, err = _run(capsys, f"{source}:Loose", "--samples", "200000", "--epsilon", "0.5")
    assert code == 1 and not err, err
    assert out[-1].startswith("audit-mechanism 'user_noise.py:Loose' failed its audit: declared epsilon 0.5*d")
    code, out, _ = _run(capsys, "rr", "--samples", "100000", "--level", "label")
    assert code == 0 and "labels 0, 1 of 2" in out[-1]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["{src}:Missing"], "user_noise.py:Missing': user_noise.py defines no 'Missing'"),
        (["nope.py:X"], "audit-mechanism = 'nope.py:X': no file 'nope.py'"),
        (["{src}:NotAMechanism"], "NotAMechanism is not a mechanism"),
        (["{src}:MyPlanar", "--level", "label"], "is a sentence-level mechanism, not a label-level one: drop --level"),
        (["{src}:MyPlanar", "--options", "bogus = 1"], "unexpected keyword argument 'bogus'"),
        (["{src}:MyPlanar", "--options", 'normalize_output = "no"'], "--options: normalize_output = 'no' must be"),
        (["{src}:Open"], "'user_noise.py:Open' was not audited: it declares no privacy"),
        (["{src}:Failing"], "'user_noise.py:Failing': it failed while audited: RuntimeError: boom"),
        (["gauss"], "unknown mechanism 'gauss'; did you mean 'gaussian'?"),
        (["{src}:Loose", "--epsilon", "10", "--samples", "20000"], "declared epsilon 20 for the pair is beyond the"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    source = write_mechanisms(tmp_path)
    code, out, err = _run(capsys, *[a.replace("{src}", str(source)) for a in args])
    assert code == 2 and not out and len(err) == 1, (out, err)
    assert err[0].startswith("sanitas: error: ") and expected.replace("{src}", str(source)) in err[0], err


@pytest.mark.parametrize(
    "args",
    [
        ["x.py:C", "--epsilon", "0"],
        ["x.py:C", "--options", "a b"],
        ["x.py:C", "--dim", "1"],
        ["x.py:C", "--level", "w"],
    ],
)
def test_a_bad_option_is_refused_while_parsing(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    block_handlers(monkeypatch, "the bad option")
    code, _, err = _run(capsys, *args)
    assert code == 2 and len(err) == 1 and args[1] in err[0] and len(err[0]) <= 200, err


def test_the_default_false_refusal_rate_is_the_runs() -> None:
    """The parser (which imports no torch) states the run's check's alpha itself: they agree."""
    from mechanisms.audit.quick import QUICK_ALPHA

    assert audit_mechanism.DEFAULT_ALPHA == QUICK_ALPHA
