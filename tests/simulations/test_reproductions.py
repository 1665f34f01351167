"""The reproduction registry is read from TOML specs (simulations/experiments/reproductions/specs):
every spec loads, names a valid run config, places the paper's numbers on its grid, and a malformed
spec is a one-line error naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fl import config
from simulations.drivers import grid
from simulations.drivers import reproductions as reg

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(reg.SPEC_DIR.glob("*.toml"))


#: Every registered reproduction as its spec file says, pinned: (base config, x key, series key, seeds, number
#: of sweep blocks, number of paper numbers). A spec edited, lost or misread changes a row.
PINNED: dict[str, tuple[str, str, str, tuple[int, ...], int, int]] = {
    "du2023-figure2-imdb": ("du2023_imdb.toml", "sentence-epsilon", "sentence-mechanism", (1, 2, 3), 2, 0),
    "du2023-figure2-qnli": ("du2023_qnli.toml", "sentence-epsilon", "sentence-mechanism", (1, 2, 3), 2, 0),
    "du2023-figure2-sst2": ("du2023_sst2.toml", "sentence-epsilon", "sentence-mechanism", (1, 2, 3), 2, 0),
    "du2023-figure3-imdb": ("du2023_imdb.toml", "label-epsilon", "label-mechanism", (1, 2, 3), 1, 0),
    "du2023-figure3-qnli": ("du2023_qnli.toml", "label-epsilon", "label-mechanism", (1, 2, 3), 1, 0),
    "du2023-figure3-sst2": ("du2023_sst2.toml", "label-epsilon", "label-mechanism", (1, 2, 3), 1, 0),
    "du2023-table2-imdb": ("du2023_imdb.toml", "map-dim", "sentence-mechanism", (1, 2, 3), 2, 15),
    "du2023-table2-qnli": ("du2023_qnli.toml", "map-dim", "sentence-mechanism", (1, 2, 3), 2, 15),
    "du2023-table2-sst2": ("du2023_sst2.toml", "map-dim", "sentence-mechanism", (1, 2, 3), 2, 15),
    "du2023-table2-sst2-leaky": ("du2023_sst2.toml", "map-dim", "sentence-mechanism", (1, 2, 3), 1, 6),
    "feyisetan2021-senteval-cr": (
        "feyisetan2021_senteval.toml",
        "sentence-epsilon",
        "sentence-mechanism",
        (1, 2, 3),
        3,
        2,
    ),
    "feyisetan2021-senteval-mpqa": (
        "feyisetan2021_senteval.toml",
        "sentence-epsilon",
        "sentence-mechanism",
        (1, 2, 3),
        3,
        2,
    ),
    "feyisetan2021-senteval-mr": (
        "feyisetan2021_senteval.toml",
        "sentence-epsilon",
        "sentence-mechanism",
        (1, 2, 3),
        3,
        2,
    ),
    "feyisetan2021-senteval-sst5": (
        "feyisetan2021_senteval.toml",
        "sentence-epsilon",
        "sentence-mechanism",
        (1, 2, 3),
        3,
        2,
    ),
    "feyisetan2021-senteval-subj": (
        "feyisetan2021_senteval.toml",
        "sentence-epsilon",
        "sentence-mechanism",
        (1, 2, 3),
        3,
        0,
    ),
    "feyisetan2021-senteval-trec": (
        "feyisetan2021_senteval.toml",
        "sentence-epsilon",
        "sentence-mechanism",
        (1, 2, 3),
        3,
        2,
    ),
    "huang2024-words-agnews": ("huang2024_agnews.toml", "word-epsilon", "word-mechanism", (1, 2, 3), 2, 0),
    "huang2024-words-sst2": ("huang2024_sst2.toml", "word-epsilon", "word-mechanism", (1, 2, 3), 2, 0),
    "meehan2022-figure4-20ng": ("meehan2022_20ng.toml", "document-epsilon", "document-mechanism", (1, 2, 3), 3, 0),
    "meehan2022-figure4-imdb": ("meehan2022_imdb.toml", "document-epsilon", "document-mechanism", (1, 2, 3), 3, 0),
}


def test_every_spec_file_is_registered_under_its_file_name() -> None:
    assert sorted(p.stem for p in SPECS) == sorted(PINNED)  # the files on disk
    assert sorted(reg.REPRODUCTIONS) == sorted(PINNED)  # the registry read from them


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_spec_loads_what_its_file_says(name: str) -> None:
    rep = reg.load_spec(reg.SPEC_DIR / f"{name}.toml")
    assert (rep.config, rep.x, rep.series, rep.seeds, len(rep.blocks), len(rep.paper)) == PINNED[name]
    assert rep.name == name and rep.title and rep.citation


def test_the_paper_s_numbers_are_read_with_numeric_x_values() -> None:
    """A TOML key is a string: the x value is read back as a number, the paper's figure as a float."""
    sst2 = reg.REPRODUCTIONS["du2023-table2-sst2"].paper
    assert sst2[("none", 16.0)] == 0.9335  # Du et al. 2023, Table 2: SST-2 without noise at m' = 16
    assert all(type(x) is float and type(v) is float for (_, x), v in sst2.items())
    assert reg.REPRODUCTIONS["feyisetan2021-senteval-sst5"].paper[("planar_laplace", 10.0)] == 0.319


@pytest.mark.parametrize("name", sorted(reg.REPRODUCTIONS))
def test_every_base_config_resolves(name: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flat run config a spec names is a valid run config as written. Its data-dir (../shared/data)
    is relative to the repository root, where ``sanitas reproduce`` runs; where the data is staged
    elsewhere ($SANITAS_DATA_DIR), that folder stands in for it."""
    path = reg.get(name).config_path
    assert path.parent == reg.CONFIG_DIR and path.is_file()
    monkeypatch.chdir(REPO)
    settings = config.load_toml(path)
    if settings.get("data-dir") and not Path(settings["data-dir"]).is_dir():
        settings["data-dir"] = str(data_dir)
    config.resolve(settings)


def _grid_points(rep: reg.Reproduction) -> set[tuple[str, float]]:
    """(series, x) of every point of the full grid that has an x value."""
    runs = grid.expand([[grid.parse_grid(spec) for spec in block] for block in rep.blocks], (1,))
    points = set()
    for run in runs:
        values = run.point_values
        x = next((values[k] for k in rep.x_keys if values.get(k) is not None), None)
        set_series = [str(values[k]) for k in rep.series_keys if values.get(k) is not None]
        series = next((s for s in set_series if s != "none"), set_series[0] if set_series else "")
        if x is not None:
            points.add((series, float(x)))
    return points


@pytest.mark.parametrize("name", sorted(reg.REPRODUCTIONS))
def test_every_paper_number_is_on_the_grid(name: str) -> None:
    rep = reg.get(name)
    missing = set(rep.paper) - _grid_points(rep)
    assert not missing, sorted(missing)


def test_the_grid_check_has_power() -> None:
    """A paper number off the grid (an m' the sweep does not run) is caught by the check above."""
    rep = reg.get("du2023-table2-sst2")
    assert ("purkayastha", 16.0) in _grid_points(rep)
    assert ("purkayastha", 512.0) not in _grid_points(rep)
    assert ("laplace", 16.0) not in _grid_points(rep)


GOOD = "du2023-figure2-sst2"  # copied unchanged beside the malformed one
BAD = "du2023-table2-sst2"  # copied, then broken as each case says


def _break(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


MALFORMED = {
    # case: (how to break the du2023-table2-sst2 spec, the key the error must name)
    "unknown key": (lambda t: 'colour = "red"\n' + t, "colour"),
    "misspelt key": (lambda t: _break(t, "\nlog_x = ", "\nlogx = "), "logx"),
    "missing key": (lambda t: _break(t, '\nx = "map-dim"\n', "\n"), "x"),
    "seeds not a list": (lambda t: _break(t, "seeds = [1, 2, 3]", 'seeds = "1,2,3"'), "seeds"),
    "log_x not a boolean": (lambda t: _break(t, "log_x = true", 'log_x = "yes"'), "log_x"),
    "a block not a list": (lambda t: _break(t, "blocks = [\n  [", "blocks = [\n  'map-dim=16', ["), "blocks"),
    "metric empty": (lambda t: _break(t, 'metric = "accuracy"', 'metric = ""'), "metric"),
    "paper x not a number": (lambda t: _break(t, '"16" = 0.9243', '"sixteen" = 0.9243'), 'paper.purkayastha."sixteen"'),
    "paper number not a number": (lambda t: _break(t, '"16" = 0.9243', '"16" = "0.9243"'), 'paper.purkayastha."16"'),
    "name not the file's": (lambda t: _break(t, f'name = "{BAD}"', 'name = "du2023-other"'), "name"),
    "config not found": (lambda t: _break(t, 'config = "du2023_sst2.toml"', 'config = "du2099.toml"'), "config"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_spec_is_a_one_line_error_naming_the_file_and_key(case: str, tmp_path: Path) -> None:
    breaks, key = MALFORMED[case]
    good = tmp_path / f"{GOOD}.toml"
    good.write_text((reg.SPEC_DIR / f"{GOOD}.toml").read_text())
    bad = tmp_path / f"{BAD}.toml"
    bad.write_text(breaks((reg.SPEC_DIR / f"{BAD}.toml").read_text()))
    with pytest.raises(reg.SpecError) as err:
        reg.load(tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{bad}: ") and f"'{key}'" in message, message
    # power: the correct spec in the same folder loads, and so does the folder without the broken one
    assert reg.load_spec(good) == reg.REPRODUCTIONS[GOOD]
    bad.unlink()
    assert reg.load(tmp_path) == {GOOD: reg.REPRODUCTIONS[GOOD]}


def test_invalid_toml_and_an_empty_folder_name_the_file_or_folder(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "broken"\ntitle = \n')
    with pytest.raises(reg.SpecError, match=r"broken\.toml: not valid TOML: .*line 2") as err:
        reg.load(tmp_path)
    assert "\n" not in str(err.value)
    bad.unlink()
    with pytest.raises(reg.SpecError, match="no reproduction specs"):
        reg.load(tmp_path)


def test_optional_keys_take_the_dataclass_defaults(tmp_path: Path) -> None:
    """A minimal spec (the required keys only) loads with Reproduction's defaults."""
    (tmp_path / "mini.toml").write_text(
        'name = "mini"\ntitle = "t"\ncitation = "c"\nconfig = "du2023_sst2.toml"\n'
        'blocks = [["map-dim=16,32"]]\nx = "map-dim"\nseries = "sentence-mechanism"\n'
    )
    rep = reg.load(tmp_path)["mini"]
    assert rep == reg.Reproduction(
        name="mini",
        title="t",
        citation="c",
        config="du2023_sst2.toml",
        blocks=(("map-dim=16,32",),),
        x="map-dim",
        series="sentence-mechanism",
    )
    assert rep.seeds == (1, 2, 3) and rep.paper == {} and rep.by_sentences_at is None
