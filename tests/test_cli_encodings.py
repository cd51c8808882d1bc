"""`extrapolate encodings` through the CLI: listing, show --json, and one-line errors with exit code 2."""

import json

import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


def test_list_names_every_encoding():
    result = invoke("encodings")
    assert result.exit_code == 0
    for name in [
        "sinusoidal",
        "learned",
        "t5",
        "alibi",
        "rope",
        "nope",
        "pi",
        "ntk",
        "dynamic-ntk",
        "yarn",
        "dynamic-yarn",
        "llama3",
    ]:
        assert name in result.stdout


def test_show_yarn_json_is_one_object():
    result = invoke("encodings", "show", "yarn", "--head-dim", "64", "--factor", "8", "--original-len", "256", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["attention_factor"] == pytest.approx(1.2079441542)
    assert data["inv_freq"][:2] == pytest.approx([1.0, 0.6994205], rel=1e-6)


def test_show_alibi_t5_sinusoidal_json():
    assert json.loads(invoke("encodings", "show", "alibi", "--heads", "6", "--json").stdout)["slopes"] == pytest.approx(
        [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    )
    t5 = json.loads(invoke("encodings", "show", "t5", "--distances", "1,5,20,200,1000", "--json").stdout)
    assert t5["buckets"] == [1, 5, 17, 31, 31]
    vec = json.loads(invoke("encodings", "show", "sinusoidal", "--position", "1", "--width", "8", "--json").stdout)
    assert vec["vector"][0] == pytest.approx(0.84147098)


def test_show_dynamic_ntk_at_a_length():
    data = json.loads(
        invoke(
            "encodings", "show", "dynamic-ntk", "--factor", "8", "--original-len", "256", "--seq-len", "512", "--json"
        ).stdout
    )
    from extrapolate.encodings.frequencies import rope_inv_freq

    assert data["inv_freq"] == pytest.approx(rope_inv_freq(64, 96610.5436).tolist(), rel=1e-6)


@pytest.mark.parametrize(
    "args, ignored",
    [
        (["alibi", "--factor", "8"], ["--factor"]),  # slopes do not scale
        (["rope", "--heads", "4"], ["--heads"]),  # one rotation for every head
        (["t5", "--base", "500", "--width", "16"], ["--base", "--width"]),
        (["yarn", "--factor", "8", "--heads", "4"], ["--heads"]),  # the factor changes yarn's inv_freq: no warning
        (["alibi", "--heads", "4"], []),
        (["sinusoidal", "--position", "5", "--width", "4"], []),
        (["alibi", "--factor", "8", "--plot", "PLOT"], []),  # the frequency figure draws every scaling at --factor
    ],
)
def test_show_warns_of_inputs_that_change_nothing(args, ignored, tmp_path):
    args = [str(tmp_path / "f.png") if a == "PLOT" else a for a in args]
    result = invoke("encodings", "show", *args, "--json")
    assert result.exit_code == 0
    warned = [line.split()[1] for line in result.output.splitlines() if line.startswith("warning:")]
    assert warned == ignored
    assert json.loads(result.stdout)["encoding"] == args[0]  # stdout stays one JSON object


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "freq.png"
    assert invoke("encodings", "show", "yarn", "--factor", "8", "--plot", str(out)).exit_code == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["encodings", "show", "yarnn"], "yarn"),
        (["encodings", "show", "alibbi"], "alibi"),
        (["encodings", "show", "pi", "--factor", "0"], "factor"),
        (["encodings", "show", "ntk", "--factor", "-2"], "factor"),
        (["encodings", "show", "rope", "--head-dim", "63"], "even"),
        (["encodings", "show", "alibi", "--heads", "0"], "heads"),
        (["encodings", "show", "alibi", "--heads", "x"], "--heads"),
        (["encodings", "show", "t5", "--distances", "1,a"], "distances"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    result = invoke(*args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.output


def test_show_prints_floats_without_binary_noise():
    """0.1 · 6 is 0.6000000000000001 in binary: the text shows 0.6, in a table of lists as in a list."""
    shown = " ".join(invoke("encodings", "show", "cope").stdout.split())
    assert "gates 0.1: [0.1, 0.2, 0.6, 2.1, 20.1, 100.1]" in shown and "000000" not in shown
    yarn = invoke("encodings", "show", "yarn", "--factor", "4").stdout
    assert "attention_factor: 1.1386294" in yarn
