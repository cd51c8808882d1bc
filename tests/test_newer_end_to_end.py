"""The newer encodings (xPos, p-RoPE, KERPLE, FIRE, RoPE/NoPE hybrids, randomized positions) through the CLI:
listed with their parameters, shown as JSON, trained and evaluated by `run` and `sweep`, and bad parameters in
one line."""

import json
import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.encodings import encoding_groups

from .helpers import make_corpus, tiny_options

NEWER = [
    "sinusoidal-randomized",
    "rope-randomized",
    "xpos",
    "p-rope",
    "kerple-log",
    "kerple-power",
    "fire",
    "rope-nope",
    "swa-rope-nope",
]  # the from-scratch ones; the training-free ones are tested in test_two_part.py
HYBRIDS = ["rope-nope", "swa-rope-nope"]
OWN_ATTENTION = ["stick-breaking", "cope"]  # from scratch too, registered after the training-free ones
LATER = [*OWN_ATTENTION, "fope", "dape"]  # every from-scratch one registered after the training-free ones
runner = CliRunner()


@pytest.fixture()
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def test_listed_with_parameters_and_grouped(monkeypatch):
    from extrapolate.cli.util import stdout

    monkeypatch.setattr(stdout, "width", 400)  # one line per encoding
    result = runner.invoke(app, ["encodings"])
    assert result.exit_code == 0
    for name in NEWER:
        assert name in result.stdout
    for parameter in ["fraction=0.75", "scale_base=512.0", "max_position=8 × train length", "threshold=512.0"]:
        assert parameter in result.stdout
    groups = encoding_groups()
    assert groups["newer"] == NEWER + [
        "longrope",
        "logn",
        "llama4-temperature",
        "self-extend",
        "rerope",
        "streaming-llm",
        "lm-infinite",
        "string",
        "dual-chunk",
        "ssmax",
        "fox",
        "fox-rope",
        *LATER,
        "drope",
    ]
    assert "rope" in groups["classic"] and not set(NEWER) & set(groups["classic"])


@pytest.mark.parametrize("name", NEWER + LATER)
def test_show_json_is_one_object(name):
    result = runner.invoke(app, ["encodings", "show", name, "--json", "--position", "1000"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["encoding"] == name


@pytest.mark.parametrize(
    "args,position",
    [([], 1000), (["--distances", "0,3,7"], 7), (["--distances", "0,1,5,20,50", "--position", "600"], 600)],
)
def test_fire_show_places_the_query_where_every_distance_exists(args, position):
    """With no --position the query sits at the farthest distance shown (key 0), so the defaults work."""
    result = runner.invoke(app, ["encodings", "show", "fire", "--json", *args])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["position"] == position
    d = max(shown["distances"])
    # ψ(d) / ψ(max(L_thr, i)) with ψ(x) = log(c·x + 1), c = 0.1, L_thr = 512
    assert shown["normalised_distance"][-1] == pytest.approx(
        math.log(0.1 * d + 1) / math.log(0.1 * max(512, position) + 1), rel=1e-6
    )


def test_sinusoidal_show_defaults_to_position_one():
    result = runner.invoke(app, ["encodings", "show", "sinusoidal", "--json", "--width", "2"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["vector"] == pytest.approx([math.sin(1.0), math.cos(1.0)])


@pytest.mark.parametrize(
    "args,flag",
    [
        (["p-rope", "--fraction=0"], "--fraction"),
        (["p-rope", "--fraction=1.5"], "--fraction"),
        (["p-rope", "--fraction=nan"], "--fraction"),
        (["xpos", "--scale-base=-512"], "--scale-base"),
        (["kerple-log", "--r1=-1"], "--r1"),
        (["kerple-power", "--r2=2.5"], "r2"),
        (["kerple-log", "--r2=0"], "--r2"),
        (["kerple-log", "--r1=1e39"], "float32"),
        (["kerple-power", "--r2=1e39"], "float32"),
        (["fire", "--fire-c=-0.1"], "--fire-c"),
        (["fire", "--threshold=0"], "--threshold"),
        (["rope-randomized", "--max-position=0"], "--max-position"),
        (["rope-randomized", "--max-position=8", "--seq-len=9"], "--seq-len"),
        (["rope-nope", "--nope-every=0"], "--nope-every"),
        (["swa-rope-nope", "--window=0"], "--window"),
        (["cope", "--cope-positions=1"], "--cope-positions"),
        (["alibi", "--fraction=0.5"], "--fraction"),
        (["stick-breaking", "--distances=0"], "--distances ≥ 1"),
        (["pose"], "--finetune-positions pose"),
    ],
)
def test_bad_parameters_fail_in_one_line(args, flag):
    result = runner.invoke(app, ["encodings", "show", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and flag in lines[0], result.output


@pytest.mark.parametrize("name", NEWER + LATER)
def test_run_trains_and_evaluates(name, cache, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    depth = ["--layers", "4"] if name in HYBRIDS else []  # a NoPE layer (every 4th) in a tiny model
    args = [
        "run",
        "--encoding",
        name,
        *tiny_options(),
        *depth,
        "--tasks",
        "perplexity",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    ppl = pd.read_csv(out / "results.csv").query("metric == 'ppl'")
    assert sorted(ppl.eval_len) == [32, 64, 128] and (ppl.status == "ok").all() and (ppl.value > 1).all()
    assert set(ppl.base_encoding) == {name}  # trained as its own model
    if name in ("kerple-log", "kerple-power", "fire"):
        assert set(ppl.kernel) == {"blocked"}  # no fused form: the linear-memory blocked kernel
    record = json.loads((out / "run.json").read_text())["encoding"]
    assert record["name"] == name
    if name.endswith("-randomized"):
        assert record["max_position"] == 8 * 32  # L_max recorded with the results
    if name in HYBRIDS:
        assert record["nope_every"] == 4


@pytest.mark.parametrize("name", HYBRIDS)
def test_a_hybrid_without_a_nope_layer_is_refused_before_training(name, cache, tmp_path):
    """k = 4 in the tiny model's two layers would train plain RoPE under the hybrid's name."""
    args = ["run", "--encoding", name, *tiny_options(), "--corpus", str(make_corpus(tmp_path / "c"))]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no NoPE layer in a model of 2 layers" in lines[0], result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()  # refused before any work


@pytest.mark.parametrize(
    "args,shown",
    [
        ([], [3, 7, 11]),
        (["--layers", "4"], [3]),
        (["--layers", "3"], "error"),
        (["--layers", "3", "--nope-every", "3"], [2]),
        (["--layers", "5", "--nope-every", "2"], [1, 3]),
    ],
)
def test_show_names_the_nope_layers_of_the_depth_given(args, shown):
    result = runner.invoke(app, ["encodings", "show", "rope-nope", "--json", *args])
    if shown == "error":
        assert result.exit_code == 2 and "needs 4 layers or more (--layers" in result.output
        return
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["nope_layers"] == shown


def test_sweep_runs_the_newer_group(cache, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--encodings",
        "xpos,kerple-log",
        *tiny_options(steps=3, eval_len=64, eval_tokens=128),
        "--tasks",
        "perplexity",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv")
    assert set(table.encoding) == {"xpos", "kerple-log"} and (table.status == "ok").all()
