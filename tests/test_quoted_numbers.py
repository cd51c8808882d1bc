"""The numbers docs/encodings.md and the results READMEs quote for the newer methods, each recomputed from the
committed results: a doc that says what its results do not (or results re-made without the doc) fails here.
(The README's findings table is checked by tests/test_findings.py.)"""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from extrapolate.report.labels import label_variants
from tests.helpers import pooled_hits, wilson_cell

ROOT = Path(__file__).resolve().parents[1]


def rows(folder: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / "results" / folder / "results.csv")


def longrope_against_yarn(run: str, length: int = 2048) -> str:
    """A longrope-search run's perplexity over YaRN's on the same documents, with its interval paired by document."""
    from extrapolate.core.intervals import nll_difference
    from extrapolate.report.samples import load_documents

    documents = load_documents(ROOT / "results" / "longrope-search")
    documents = documents[documents["eval_len"] == length]
    yarn = documents[documents["run_id"] == rows("longrope-search").query("encoding == 'yarn'")["run_id"].iloc[0]]

    def lists(frame):
        frame = frame.sort_values("index")
        return list(frame["nll_sum"]), list(frame["tokens"])

    mine = documents[documents["run_id"].str.startswith(run)]
    assert mine["index"].tolist() and sorted(mine["index"]) == sorted(yarn["index"])
    mean, low, high = (math.exp(v) for v in nll_difference(*lists(mine), *lists(yarn)))
    return f"{mean:.3f}× [{low:.3f}–{high:.3f}]"


def ppl(folder: str, encoding: str, length: int, seed: int = 0, run: str = "") -> float:
    t = rows(folder)
    t = t[(t.encoding == encoding) & (t.eval_len == length) & (t.metric == "ppl") & (t.seed == seed)]
    t = t[t.run_id.str.startswith(run)]
    assert len(t) == 1, (folder, encoding, length, seed, run)
    return float(t.value.iloc[0])


# STRING's SmolLM2 runs by factor: with the reference's attention factor, and the first ones without it
STRING = {2: "5af047", 4: "30aa14"}
STRING_NO_FACTOR = {2: "beb422", 4: "7d714f"}
STRING_PASSKEY, STRING_PASSKEY_NO_FACTOR = "cd7fa5", "f72492"  # its smollm2-retrieval cells at 16384
FIRST_RUNS = {"string": STRING_PASSKEY_NO_FACTOR}  # what NOTES.md's history measured


def smollm2_row(encoding: str, run: str = "", label: str = "") -> str:
    """A row of results/smollm2/README.md's table: perplexity at 8192 and 16384, and 16384 over RoPE's at L."""
    at_l, past = ppl("smollm2", encoding, 8192, run=run), ppl("smollm2", encoding, 16384, run=run)
    return f"| {label or encoding} | {at_l:.3f} | {past:.3f} | {past / ppl('smollm2', 'rope', 8192):.2f}× |"


def ratio_cell(folder: str, label: str, length: int) -> str:
    """A cell of a report's table of perplexity against the base model at L: "1.11× [1.10–1.11]"."""
    from extrapolate.report.ratios import ratio_aggregate
    from extrapolate.report.retrieval import base_encodings
    from extrapolate.report.run_options import with_options
    from extrapolate.report.samples import load_documents

    path = ROOT / "results" / folder
    table = label_variants(with_options(rows(folder), path))
    cells = ratio_aggregate(table, base_encodings(table), load_documents(path))
    cell = cells[(cells["encoding"] == label) & (cells["eval_len"] == length)].iloc[0]
    return f"{cell['mean']:.2f}× [{cell['low']:.2f}–{cell['high']:.2f}]"


def highest_chat_cells() -> str:
    """The two highest +chat cells of smollm2-ruler-25 outside the single needles, each below RULER's bar."""
    t = rows("smollm2-ruler-25")
    t = t[t.protocol.str.endswith("+chat") & ~t.protocol.str.startswith(("niah_single_1", "niah_single_2"))]
    top = t.sort_values(["value", "protocol"], ascending=[False, True]).head(2)
    assert (t.value < 0.856).all() and top.eval_len.nunique() == 1
    cells = [
        f"{r.value * 100:.0f} [{r.ci_low * 100:.0f}–{r.ci_high * 100:.0f}] (`{r.protocol.split('-v')[0]}`)"
        for r in top.sort_values("protocol", ascending=False).itertuples()
    ]
    return f"the highest are {cells[0]} and {cells[1]}, both at {top.eval_len.iloc[0]}"


def chat_summary() -> str:
    """What the chat template moves in smollm2-ruler-25, over the family and on its own (report/paired.py)."""
    from extrapolate.report.paired import chat_differences, moved, moved_over_family

    cells = chat_differences(ROOT / "results" / "smollm2-ruler-25").to_dict("records")
    family = [r for r in cells if moved_over_family(r)]
    alone = [r for r in cells if moved(r)]
    if len(family) != 1:
        return f"{len(family)} cells over the family"
    (r,) = family
    words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    return (
        f"one change holds over the {len(cells)} cells, `{r['protocol'].split('-v')[0]}` at {r['eval_len']} rising "
        f"from\n{100 * r['plain']:.0f} to {100 * r['chat']:.0f} under the template; "
        f"{words.get(len(alone) - 1, len(alone) - 1)} more cells' paired intervals exclude 0 on their own"
    )


def logn_paired() -> str:
    """log-n against RoPE on seed 0's model at 2L, paired (report/against_base.py)."""
    from extrapolate.report.against_base import base_differences

    cells = base_differences(ROOT / "results" / "showcase-training-free")
    (r,) = cells[(cells.label == "logn") & (cells.seed == 0) & (cells.eval_len == 512)].to_dict("records")
    return (
        f"seed 0's cell at 2L rises\n  from {r['base_score']:.0%} to {r['score']:.0%}, p = {r['p']:.3f} on its own, "
        f"but Holm's adjustment over all {len(cells)} method cells of the folder's report\n  leaves {r['p_holm']:.3f}"
    )


def spread(encoding: str) -> tuple[str, str]:
    """The least and the most of `flatness` over the three seeds."""
    ratios = sorted(flatness(encoding, s) for s in (0, 1, 2))
    return ratios[0].removesuffix("×"), ratios[-1]


def at_l_both(encoding: str) -> str:
    """Seed 0's perplexity at L in showcase-training-free, where the one-seed showcase has the same value."""
    here, there = ppl("showcase-training-free", encoding, 256), ppl("showcase", encoding, 256)
    return f"{here:.3f}" if round(here, 3) == round(there, 3) else f"{here:.3f} (the showcase: {there:.3f})"


def seed_run(encoding: str, seed: int) -> str:
    """The run id of an encoding at a seed in showcase-training-free."""
    t = rows("showcase-training-free")
    (run,) = t[(t.encoding == encoding) & (t.seed == seed)].run_id.unique()
    return run


def flatness(encoding: str, seed: int) -> str:
    """Perplexity at 8L over its value at L on the showcase RoPE model of a seed: "1.01×"."""
    folder = "showcase-training-free"
    return f"{ppl(folder, encoding, 2048, seed) / ppl(folder, encoding, 256, seed):.2f}×"


def adapters_row(encoding: str) -> str:
    """A row of results/finetune-adapters/README.md's table: perplexity at 1024 by method and steps."""
    t = rows("finetune-adapters")
    t = t[(t.encoding == encoding) & (t.eval_len == 1024) & (t.metric == "ppl")]

    def at(steps: int, adapter) -> str:
        pick = t[
            (t.finetune_steps == steps)
            & (t.finetune_adapter.isna() if adapter is None else t.finetune_adapter == adapter)
        ]
        assert len(pick) == 1, (encoding, steps, adapter)
        return f"{float(pick.value.iloc[0]):.2f}"

    cells = [at(0, None)] + [f"{at(25, a)} / {at(100, a)}" for a in (None, "lora", "longlora")]
    return f"| {encoding} | " + " | ".join(cells) + " |"


def seed_pcts(encoding: str, length: int) -> list[str]:
    """An encoding's greedy retrieval at a length in showcase-seeds, seed by seed (0, 1, 2): ["83%", …]."""
    t = rows("showcase-seeds")
    t = t[(t.encoding == encoding) & (t.eval_len == length) & (t.metric == "accuracy")]
    return [f"{(g.value * g.n).sum() / g.n.sum():.0%}" for _, g in sorted(t.groupby("seed"))]


def seed_rises(encoding: str) -> list[float]:
    """Perplexity at 8L over its value at L in showcase-seeds, seed by seed (0, 1, 2)."""
    return [ppl("showcase-seeds", encoding, 2048, s) / ppl("showcase-seeds", encoding, 256, s) for s in (0, 1, 2)]


def span(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}×"


def learning_seeds(encoding: str) -> list[int]:
    """The seeds of showcase-seeds whose model retrieves at L (greedy ≥ 80% there)."""
    return [k for k, pct in enumerate(seed_pcts(encoding, 256)) if int(pct[:-1]) >= 80]


def kerple_text() -> str:
    """The showcase-seeds README's KERPLE sentence: retrieval at 8L over the seeds that retrieve at L."""
    rises = {e: seed_rises(e) for e in ("kerple-log", "kerple-power")}
    at_l = {e: seed_pcts(e, 256) for e in rises}
    at_8l = {e: seed_pcts(e, 2048) for e in rises}
    kept = [int(at_8l[e][s][:-1]) for e in rises for s in range(3) if int(at_l[e][s][:-1]) >= 80]
    alibi = [int(v[:-1]) for v in seed_pcts("alibi", 2048)]
    flat = {f"{r:.2f}" for r in rises["kerple-log"] + rises["kerple-power"]}
    return (
        f"perplexity at 8L {'/'.join(sorted(flat))}× its value at L for both variants in every seed, as ALiBi's; "
        "and on the "
        f"{['no', 'one', 'two', 'three', 'four', 'five', 'six'][len(kept)]} of six\n  models that retrieve at L, "
        f"greedy retrieval at 8L is {min(kept)}–{max(kept)}%, none lost (each interval reaches the bar of 80),\n"
        f"  where ALiBi's three fall to {min(alibi)}–{max(alibi)}%. KERPLE-power's seed 1 never learned retrieval "
        f"at L ({at_l['kerple-power'][1]}), and KERPLE-log's\n  seed 0 retrieves {at_l['kerple-log'][0]} at L and "
        f"{at_8l['kerple-log'][0]} at 8L"
    )


def xpos_prope_text() -> str:
    """The showcase-seeds README's xPos and p-RoPE sentences."""
    xpos_l, xpos_4l = seed_pcts("xpos", 256), seed_pcts("xpos", 1024)
    prope_l, prope_2l = seed_pcts("p-rope", 256), seed_pcts("p-rope", 512)
    learned = [s for s in range(3) if prope_l[s] == "100%"]
    (s,) = learned
    others = [prope_l[k] for k in range(3) if k != s]
    return (
        f"{span(seed_rises('xpos'))}\n  at 8L against RoPE's {span(seed_rises('rope'))} on the same seeds, yet its "
        f"retrieval, {'100%' if set(xpos_l) == {'100%'} else xpos_l} at L in every seed, is lost by 4L in\n"
        "  every seed "
        f"({', '.join(xpos_4l)}). **p-RoPE** (a quarter of the pairs unrotated) degrades as RoPE does "
        f"({span(seed_rises('p-rope'))} at\n  8L) and learns retrieval at L in one seed of three ({prope_l[s]}; "
        f"{others[0]} and {others[1]} in the others), losing it by 2L there\n  ({prope_2l[s]})"
    )


def fire_text() -> str:
    """The showcase-seeds README's FIRE sentence: the one seed that learns retrieval at L, and the two that do not."""
    at_l, at_8l = seed_pcts("fire", 256), seed_pcts("fire", 2048)
    (s,) = learning_seeds("fire")
    a, b = (k for k in range(3) if k != s)
    return (
        f"{span(seed_rises('fire'))} at 8L against RoPE's {span(seed_rises('rope'))} on the same seeds. One seed of "
        f"three learns\n  retrieval at L (seed {s}: {at_l[s]}) and keeps it to 8L ({at_8l[s]}); seeds {a} and {b} "
        f"do not learn it ({at_l[a]} and {at_l[b]})"
    )


def randomized_text() -> str:
    """The showcase-seeds README's sentence on the randomized encodings: flatness, its cost at L against the
    plain encoding of the same seed, and retrieval seed by seed."""
    rises = seed_rises("rope-randomized") + seed_rises("sinusoidal-randomized")

    def cost(encoding: str, plain: str) -> str:
        return span([ppl("showcase-seeds", encoding, 256, k) / ppl("showcase-seeds", plain, 256, k) for k in range(3)])

    rope_l, rope_8l = seed_pcts("rope-randomized", 256), seed_pcts("rope-randomized", 2048)
    learned = learning_seeds("rope-randomized")
    (other,) = [k for k in range(3) if k not in learned]
    kept = {rope_8l[k] for k in learned}
    return (
        f"{span(rises)} at 8L for both kinds in every seed, but at L randomized RoPE's perplexity is "
        f"{cost('rope-randomized', 'rope')[:-1]}× plain\n  RoPE's and randomized sinusoidal's "
        f"{cost('sinusoidal-randomized', 'sinusoidal')[:-1]}× plain sinusoidal's, seed for seed. Randomized RoPE "
        f"learns\n  retrieval at L in two seeds of three ({' and '.join(rope_l[k] for k in learned)}) and keeps it "
        f"to 8L in both ({'/'.join(sorted(kept))}); seed {other} ends at {rope_l[other]} at\n  L. Randomized "
        f"sinusoidal learns it in no seed ({', '.join(seed_pcts('sinusoidal-randomized', 256))} at L)"
    )


def fire_randomized_doc_text() -> str:
    """docs/results.md's three-seed note on FIRE and randomized RoPE: the seeds that learn retrieval at L."""
    ((fire,), rope) = learning_seeds("fire"), learning_seeds("rope-randomized")
    rope_8l = {seed_pcts("rope-randomized", 2048)[k] for k in rope}
    return (
        f"FIRE learns retrieval at L in one seed of three ({seed_pcts('fire', 256)[fire]}, kept to 8L: "
        f"{seed_pcts('fire', 2048)[fire]}) and randomized RoPE holds it at\n  L in two "
        f"({' and '.join(seed_pcts('rope-randomized', 256)[k] for k in rope)}, kept to 8L: {'/'.join(sorted(rope_8l))} "
        "each)"
    )


def accuracy(folder: str, run: str, length: int) -> float:
    """A run's greedy retrieval at a length, its depths' prompts pooled."""
    t = rows(folder)
    t = t[t.run_id.str.startswith(run) & (t.eval_len == length) & (t.metric == "accuracy")]
    return float((t.value * t.n).sum() / t.n.sum())


def greedy(folder: str, run: str, length: int) -> str:
    """A run's greedy retrieval at a length, its depths' prompts pooled: "94% [87–98]"."""
    t = rows(folder)
    t = t[t.run_id.str.startswith(run) & (t.eval_len == length) & (t.metric == "accuracy")]
    return wilson_cell(*pooled_hits(t))


def run_of(folder: str, encoding: str) -> str:
    """The run id of an encoding's one run in a folder."""
    (run,) = rows(folder).loc[lambda t: t.encoding == encoding, "run_id"].unique()
    return run


def percents(values) -> str:
    """Shares as whole percents, "58%, 35% and 61%"."""
    parts = [f"{v * 100:.0f}%" for v in values]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}"


def seed_greedy(folder: str, encoding: str, length: int, seed: int) -> float:
    t = rows(folder)
    t = t[(t.encoding == encoding) & (t.eval_len == length) & (t.metric == "accuracy") & (t.seed == seed)]
    return float(sum(v * k for v, k in zip(t.value, t.n)) / t.n.sum())


def ruler_cells(run: str) -> str:
    """A RULER task's four cells at 1024-8192, as whole percents: "39, 46, 12 and 21"."""
    t = rows("smollm2-ruler-25").query(f"run_id == '{run}'").sort_values("eval_len")
    return percents(t.value).replace("%", "")


def ruler_tenths(run: str) -> str:
    """A RULER task's four cells at 1024-8192 to a tenth, the first with its interval: "26.4 [17–36], 4.0, …"."""
    t = rows("smollm2-ruler-25").query(f"run_id == '{run}'").sort_values("eval_len")
    first = f"{t.value.iloc[0] * 100:.1f} [{t.ci_low.iloc[0] * 100:.0f}–{t.ci_high.iloc[0] * 100:.0f}]"
    return ", ".join([first, *(f"{v * 100:.1f}" for v in t.value.iloc[1:])])


def adapter_ppl(encoding: str, steps: int, adapter) -> float:
    t = rows("finetune-adapters")
    t = t[(t.encoding == encoding) & (t.eval_len == 1024) & (t.metric == "ppl") & (t.finetune_steps == steps)]
    t = t[t.finetune_adapter.isna()] if adapter is None else t[t.finetune_adapter == adapter]
    return float(t.value.iloc[0])


def hits_of(
    encoding: str, length: int, folder: str = "smollm2-retrieval", run: str = "", metric: str = "accuracy"
) -> str:
    """ "k of n": the greedy hits (or `metric`'s) of an encoding's passkey cell at a length (one run's), its
    depths pooled."""
    table = rows(folder)
    cell = table[(table.encoding == encoding) & (table.eval_len == length) & (table.metric == metric)]
    cell = cell[cell.run_id.str.startswith(run)]
    assert cell.run_id.nunique() == 1, (encoding, length, run)
    return f"{round(float((cell.value * cell.n).sum()))} of {int(cell.n.sum())}"


def smollm2_longppl(encoding: str, candidates: bool = False):
    """smollm2-longppl's cell of `encoding`: ("3.70 over 17 key tokens" or "1.67 over 11", "0.14%"), or the
    count of its candidates ("12,289")."""
    t = rows("smollm2-longppl")
    t = t[t.encoding == encoding].set_index("metric")
    if candidates:
        return f"{int(t.loc['key_share', 'n_tokens']):,}"
    keys = int(t.loc["longppl", "n_tokens"])
    words = " key tokens" if encoding == "rope" else ""
    return f"{t.loc['longppl', 'value']:.2f} over {keys}{words}", f"{t.loc['key_share', 'value']:.2%}"


def longppl_key_counts() -> tuple[int, int]:
    """The fewest and most key tokens of a longppl-showcase cell that has any."""
    keys = rows("longppl-showcase").query("metric == 'longppl' and n_tokens > 0")["n_tokens"]
    return int(keys.min()), int(keys.max())


def longppl_showcase_keys() -> str:
    """longppl-showcase's largest key share, its count, and the encodings with no key token at any length."""
    names = {"rope": "RoPE", "pi": "PI", "ntk": "NTK", "yarn": "YaRN"}
    t = rows("longppl-showcase")
    share = t[t.metric == "key_share"]
    top = share.loc[share["value"].idxmax()]
    keys = t[t.metric == "longppl"]
    (count,) = keys[
        (keys.encoding == top.encoding) & (keys.eval_len == top.eval_len) & (keys.seed == top.seed)
    ].n_tokens
    totals = keys.groupby("encoding").n_tokens.sum()
    none = [names[e] for e in names if totals.get(e) == 0]  # in the names' order
    verb = "has" if len(none) == 1 else "have"
    return (
        f"at most {top.value:.3%} of the targets past 256 are key tokens ({count} of {int(top.n_tokens):,} for "
        f"{names[top.encoding]} at {int(top.eval_len)}, seed {int(top.seed)}), and {' and '.join(none)} {verb} none"
    )


def quoting_hits(encoding: str, *quotes: tuple[str, str]) -> list[tuple]:
    """(document, text, computed) for texts that quote an encoding's SmolLM2 passkey cell at 16384 as "0 of
    20": the computed text has the cell's own hits in their place."""
    return [
        (document, text, lambda text=text: text.replace("0 of 20", hits_of(encoding, 16384)))
        for document, text in quotes
    ]


def above_full(encoding: str) -> str:
    """How far LoRA and LongLoRA stay above the full fine-tune after 100 steps: "3% and 5%"."""
    full = adapter_ppl(encoding, 100, None)
    return percents([adapter_ppl(encoding, 100, a) / full - 1 for a in ("lora", "longlora")])


def babilong_run(steps: int) -> str:
    """The babilong-showcase run trained for `steps` steps, by its run record."""
    (run,) = [
        path.stem
        for path in (ROOT / "results" / "babilong-showcase" / "runs").glob("*.json")
        if json.loads(path.read_text())["request"]["steps"] == steps
    ]
    return run


def babilong_cell(length: int, steps: int) -> str:
    """ "37% [28–47]": a babilong-showcase cell's score with its row's interval."""
    t = rows("babilong-showcase")
    (row,) = t[(t.kind == "babilong") & (t.eval_len == length) & (t.run_id == babilong_run(steps))].itertuples()
    return f"{100 * row.value:.0f}% [{100 * row.ci_low:.0f}–{100 * row.ci_high:.0f}]"


def qa1_rules(stories: int = 20_000) -> tuple[float, float, float]:
    """(answering the last room a qa1 story names, a guess among the rooms it names, a guess among all six):
    the expected scores of three rules that do no reasoning, over stories drawn as the task draws them."""
    import random

    from extrapolate.tasks.babilong.world import ROOMS, STORY_FACTS, story

    rng, last, named = random.Random(0), 0, 0.0
    for _ in range(stories):
        told = story(rng, 1, STORY_FACTS[1])
        rooms = [room for fact in told.facts for room in ROOMS if room in fact]
        last += rooms[-1] == told.answer
        named += (told.answer in rooms) / len(set(rooms))
    return last / stories, named / stories, 1 / len(ROOMS)


def babilong_showcase_reading() -> str:
    """The README's reading of qa1 at L against the rules, its words chosen by each run's interval."""
    t = rows("babilong-showcase")
    last, named, _ = qa1_rules()

    def verdict(steps: int) -> str:
        (row,) = t[(t.kind == "babilong") & (t.eval_len == 256) & (t.run_id == babilong_run(steps))].itertuples()
        beaten = [name for name, rule in (("the guess", named), ("the last-room rule", last)) if row.ci_low > rule]
        return f"after {steps} steps {babilong_cell(256, steps)}, " + (
            f"above {' and '.join(beaten)}" if beaten else "above neither rule"
        )

    return (
        f"A rule that does no reasoning, answering the last room the story names, scores {last:.0%} on qa1's "
        f"stories, and a guess among the rooms the story names {named:.0%}. The score at L (n = 100 prompts, each "
        f"interval's low end against the rules): {verdict(1200)}; {verdict(2400)}"
    )


def babilong_probe(steps: int) -> str:
    probes = pd.read_csv(ROOT / "results" / "babilong-showcase" / "training.csv")
    probes = probes[probes.run_id == babilong_run(steps)]
    first, final = probes.iloc[0], probes.iloc[-1]
    return (
        f"from {first.retrieval_accuracy:.0%} at step {first.step} to {final.retrieval_accuracy:.0%} at step "
        f"{final.step}"
    )


TRAINED_IN_2025 = ("cope", "dape", "fope", "stick-breaking", "swa-rope-nope")


def growth_by_document(folder: str, run: str, length: int, at_l: int = 256) -> str:
    """A run's perplexity at `length` over its value at L, paired over the held-out documents: "1.48× [1.42–1.54]"."""
    from extrapolate.core.intervals import nll_difference
    from extrapolate.report.samples import load_documents

    documents = load_documents(ROOT / "results" / folder)
    documents = documents[documents["run_id"] == run]

    def lists(frame):
        frame = frame.sort_values("index")
        return list(frame["nll_sum"]), list(frame["tokens"])

    far, near = (documents[documents["eval_len"] == n] for n in (length, at_l))
    assert sorted(far["index"]) == sorted(near["index"]) and len(far) > 1, (run, length)
    mean, low, high = (math.exp(v) for v in nll_difference(*lists(far), *lists(near)))
    return f"{mean:.2f}× [{low:.2f}–{high:.2f}]"


def trained_in_counts() -> tuple[int, int]:
    """(held-out documents a perplexity cell, prompts a retrieval length) of the 2025 methods' rows: one each."""
    t = rows("showcase-seeds-v2")
    t = t[t.encoding.isin(TRAINED_IN_2025)]
    documents = t[t.metric == "ppl"].n.unique()
    prompts = t[t.metric == "accuracy"].groupby(["run_id", "eval_len"]).n.sum().unique()
    assert len(documents) == 1 and len(prompts) == 1, (documents, prompts)
    return int(documents[0]), int(prompts[0])


def trained_in_table() -> str:
    """docs/results.md's table of the 2025 trained-in methods beside RoPE in showcase-seeds-v2, seed by seed."""
    t = rows("showcase-seeds-v2")
    lines = [
        "| encoding | seed | ppl at L | ppl at 8L / at L | greedy at L | greedy at 8L |",
        "|---|---|---|---|---|---|",
    ]
    for encoding in ("rope", *TRAINED_IN_2025):
        for seed in sorted(t[t.encoding == encoding].seed.unique()):
            (run,) = t[(t.encoding == encoding) & (t.seed == seed)].run_id.unique()
            at_l, far = (
                seed_cell("showcase-seeds-v2", encoding, 256, seed),
                seed_cell("showcase-seeds-v2", encoding, 2048, seed),
            )
            learned = seed_greedy("showcase-seeds-v2", encoding, 256, seed) >= 0.8
            cells = [
                f"{ppl('showcase-seeds-v2', encoding, 256, seed):.2f}",
                growth_by_document("showcase-seeds-v2", run, 2048),
                at_l,
                far if learned else f"*{far}*",
            ]
            lines.append(f"| {encoding} | {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


NAMES_2025 = {"cope": "CoPE", "dape": "DAPE", "fope": "FoPE", "stick-breaking": "stick-breaking attention"}
NAMES_2025 |= {"swa-rope-nope": "the SWA/NoPE hybrid"}


def trained_in_reading(seed: int = 0) -> str:
    """docs/results.md's reading of the 2025 methods at one seed, each word from an interval: "flat" where the
    8L / L interval's top is at most 1.1×, "below RoPE's" where it lies under every RoPE seed's; retrieval past L
    "above RoPE's" where the 8L interval lies above RoPE's at the same seed."""
    from extrapolate.core.intervals import proportion_interval

    t = rows("showcase-seeds-v2")
    folder = "showcase-seeds-v2"

    def run(encoding: str, s: int) -> str:
        (one,) = t[(t.encoding == encoding) & (t.seed == s)].run_id.unique()
        return one

    def bounds(cell: str) -> tuple[float, float]:
        low, high = cell.split("[")[1].rstrip("]").split("–")
        return float(low), float(high)

    rope_low = min(bounds(growth_by_document(folder, run("rope", s), 2048))[0] for s in (0, 1, 2))

    def hits(encoding: str) -> tuple[float, float]:
        cell = t[(t.encoding == encoding) & (t.eval_len == 2048) & (t.metric == "accuracy") & (t.seed == seed)]
        return proportion_interval(*pooled_hits(cell))

    here = [e for e in TRAINED_IN_2025 if seed in set(t[t.encoding == e].seed)]
    flat = [e for e in here if bounds(growth_by_document(folder, run(e, seed), 2048))[1] <= 1.1]
    below = [e for e in here if e not in flat and bounds(growth_by_document(folder, run(e, seed), 2048))[1] < rope_low]
    learned = [e for e in here if seed_greedy(folder, e, 256, seed) >= 0.8]
    above = [e for e in learned if hits(e)[0] > hits("rope")[1]]
    unlearned = [e for e in here if e not in learned]

    def names(encodings: list[str]) -> str:
        words = [NAMES_2025[e] for e in encodings]
        return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)

    def verb(encodings: list[str], one: str, many: str) -> str:
        return f"{names(encodings)} {one if len(encodings) == 1 else many}"

    clauses = [
        flat
        and verb(flat, "keeps", "keep") + " perplexity flat to 8L (the interval's top at most 1.1× its value at L)",
        below
        and verb(below, "rises", "rise")
        + " past L, but by less than RoPE at any of its seeds (the interval below every RoPE seed's)",
        learned and verb(learned, "finds", "find") + " the passkey at L",
        above and verb(above, "keeps", "keep") + f" it at 8L above RoPE's seed {seed} (the intervals apart)",
        unlearned
        and verb(unlearned, "finds", "find")
        + f" none at L, so {'its' if len(unlearned) == 1 else 'their'} cells past L claim nothing",
    ]
    return f"At seed {seed}: " + "; ".join(c for c in clauses if c) + "."


def seed_cell(folder: str, encoding: str, length: int, seed: int) -> str:
    """ "71% [61–80]": a seed's greedy cell at a length, its depths pooled, with Wilson's interval."""
    t = rows(folder)
    cell = t[(t.encoding == encoding) & (t.eval_len == length) & (t.metric == "accuracy") & (t.seed == seed)]
    return wilson_cell(*pooled_hits(cell))


def showcase_cell(encoding: str, length: int) -> str:
    return seed_cell("showcase", encoding, length, 0)


def showcase_scalings_at_8l() -> str:
    """The one-seed showcase's zero-shot scalings at 8L, as docs/results.md reads them."""
    if showcase_cell("yarn", 2048) != showcase_cell("dynamic-yarn", 2048):
        return "YaRN's two cells differ"
    cell = {e: showcase_cell(e, 2048) for e in ("dynamic-yarn", "dynamic-ntk", "rope", "ntk")}
    return (
        f"dynamic YaRN and zero-shot YaRN keep it to 8L ({cell['dynamic-yarn']} each); dynamic NTK falls to "
        f"{cell['dynamic-ntk']} at 8L,\n  lost by the rule though far above RoPE's {cell['rope']}, and static NTK "
        f"loses it at 8L ({cell['ntk']})"
    )


QUOTED = [
    (
        "docs/results.md",
        "seed 0 holds it (100% [96–100]), seed 1 loses it\n  (71% [61–80]) and seed 2 straddles the bar (84% [75–91])",
        lambda: "seed 0 holds it ({}), seed 1 loses it\n  ({}) and seed 2 straddles the bar ({})".format(
            *(seed_cell("showcase-seeds", "xpos", 512, s) for s in (0, 1, 2))
        ),
    ),
    (
        "docs/results.md",
        "(100% [93–100]), then loses it (12% [5–24] at 4L)",
        lambda: f"({showcase_cell('xpos', 512)}), then loses it ({showcase_cell('xpos', 1024)} at 4L)",
    ),
    (
        "docs/results.md",
        "dynamic YaRN and zero-shot YaRN keep it to 8L (98% [89–100] each); dynamic NTK falls to 64% [49–77] at 8L,\n"
        "  lost by the rule though far above RoPE's 0% [0–7], and static NTK loses it at 8L (0% [0–7])",
        showcase_scalings_at_8l,
    ),
    (
        "docs/results.md",
        "the highest are 84 [64–95] (`niah_single_3`) and 84 [64–95] (`niah_multivalue`), both at 1024",
        lambda: highest_chat_cells(),
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "one change holds over the 44 cells, `niah_multivalue` at 1024 rising from\n53 to 84 under the template; four "
        "more cells' paired intervals exclude 0 on their own",
        lambda: chat_summary(),
    ),
    (
        "docs/results.md",
        "seed 0's cell at 2L rises\n  from 36% to 47%, p = 0.001 on its own, but Holm's adjustment over all 112 "
        "method cells of the folder's report\n  leaves 0.067",
        logn_paired,
    ),
    (
        "results/showcase-training-free/README.md",
        "perplexity at 8L 1.00×, 1.01× and\n  1.01× its value at L",
        lambda: "perplexity at 8L {}, {} and\n  {} its value at L".format(
            *(flatness("self-extend", s) for s in (0, 1, 2))
        ),
    ),
    (
        "results/showcase-training-free/README.md",
        "ReRoPE keeps perplexity within 1.11–1.13× at 8L and the passkey at 8L at 100% [96–100] on\n  seed 1; "
        "seed 0's 80% [71–87] straddles the bar of 80, neither held nor lost; "
        "LongRoPE's perplexity rises 1.23–1.26× while it keeps 97% [91–99] and 100% [96–100]",
        lambda: (
            "ReRoPE keeps perplexity within {}–{} at 8L and the passkey at 8L at {} on\n  seed 1; "
            "seed 0's {} straddles the bar of 80, neither held nor lost; "
            "LongRoPE's perplexity rises {}–{} while it keeps {} and {}"
        ).format(
            *spread("rerope"),
            *(greedy("showcase-training-free", seed_run("rerope", s), 2048) for s in (1, 0)),
            *spread("longrope"),
            *(greedy("showcase-training-free", seed_run("longrope", s), 2048) for s in (0, 1)),
        ),
    ),
    (
        "results/showcase-training-free/NOTES.md",
        "(46.455, 46.787 and 47.729 at L)",
        lambda: "({}, {} and {} at L)".format(*(at_l_both(e) for e in ("self-extend", "rerope", "longrope"))),
    ),
    (
        "results/showcase-seeds/README.md",
        "(58%, 35% and 61%)",
        lambda: f"({percents([seed_greedy('showcase-seeds', 'alibi', 2048, s) for s in (0, 1, 2)])})",
    ),
    (
        "results/showcase-training-free/README.md",
        "(100 of 100 prompts each; RoPE 1% and 7%)",
        lambda: "({:.0f} of 100 prompts each; RoPE {})".format(
            min(seed_greedy("showcase-training-free", "dual-chunk", 2048, s) for s in (0, 1)) * 100,
            percents([seed_greedy("showcase-training-free", "rope", 2048, s) for s in (0, 1)]),
        ),
    ),
    ("results/smollm2-ruler-25/README.md", "(53, 38, 25 and 25", lambda: f"({ruler_cells('507d54c9d6')}"),
    ("results/smollm2-ruler-25/README.md", "(39, 46, 12 and 21)", lambda: f"({ruler_cells('4825583755')})"),
    ("results/smollm2-ruler-25/README.md", "(14, 6, 2 and 0)", lambda: f"({ruler_cells('436f340035')})"),
    (
        "results/smollm2-ruler-25/README.md",
        "23 of 25 at 8192: 92 [74–99]",
        lambda: "{:.0f} of {:.0f} at 8192: {:.0f} [{:.0f}–{:.0f}]".format(
            *rows("smollm2-ruler-25")
            .query("run_id == '8983bfa603' and eval_len == 8192")
            .pipe(
                lambda t: [
                    t.value.iloc[0] * t.n.iloc[0],
                    t.n.iloc[0],
                    *(t[["value", "ci_low", "ci_high"]].iloc[0] * 100),
                ]
            )
        ),
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "`vt` done (26, 4, 5 and 1 +chat, against 14, 6, 2 and 0 plain",
        lambda: f"`vt` done ({ruler_cells('5960f39e4a')} +chat, against {ruler_cells('436f340035')} plain",
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "`niah_single_3` done (84, 32, 4 and 4 +chat, against 76, 40, 32 and 0 plain)",
        lambda: f"`niah_single_3` done ({ruler_cells('c15ded19d0')} +chat, against {ruler_cells('b9c6a1dcb1')} plain)",
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "`niah_multikey_1` done (72, 52, 32 and 48 +chat, against 76, 52, 40 and 48 plain)",
        lambda: (
            f"`niah_multikey_1` done ({ruler_cells('202c554a73')} +chat, against {ruler_cells('ef2d4f3345')} plain)"
        ),
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "`cwe` done (7, 4, 6 and 3 +chat, against 5, 3, 4 and 2 plain)",
        lambda: f"`cwe` done ({ruler_cells('a78acadba1')} +chat, against {ruler_cells('8385f8d50c')} plain)",
    ),
    (
        "results/smollm2-ruler-25/NOTES.md",
        "at 4096, 4 [0–20] against 32 [15–54], just",
        lambda: "at 4096, {} against {}, just".format(
            *(
                "{:.0f} [{:.0f}–{:.0f}]".format(*(r[["value", "ci_low", "ci_high"]].iloc[0] * 100))
                for r in (
                    rows("smollm2-ruler-25").query(f"run_id == '{run}' and eval_len == 4096")
                    for run in ("c15ded19d0", "b9c6a1dcb1")
                )
            )
        ),
    ),
    (
        "results/smollm2-ruler-25/NOTES.md",
        "26.4 [11–48], 4.0, 4.8, 0.8 at 1024, 2048, 4096 and 8192 (plain: 14.4 [4–34], 5.6, 2.4, 0.0)",
        lambda: f"{ruler_tenths('5960f39e4a')} at 1024, 2048, 4096 and 8192 (plain: {ruler_tenths('436f340035')})",
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "`cwe` done (5, 3, 4 and 2",
        lambda: f"`cwe` done ({ruler_cells('8385f8d50c')}",
    ),
    (
        "results/smollm2-ruler-25/README.md",
        "`fwe` done (32, 21, 16 and 5",
        lambda: f"`fwe` done ({ruler_cells('f2d305b886')}",
    ),
    (
        "results/finetune-adapters/README.md",
        "YaRN comes within 3% and 5% of the full fine-tune",
        lambda: f"YaRN comes within {above_full('yarn')} of the full fine-tune",
    ),
    (
        "results/finetune-adapters/README.md",
        "PI stays 36% and 47% above it",
        lambda: f"PI stays {above_full('pi')} above it",
    ),
    # (document, the text it holds, that text computed from the results)
    *quoting_hits(
        "lm-infinite",
        ("docs/encodings.md", "16384 is 0 of 20, at every depth"),
        ("results/smollm2-retrieval/README.md", "LM-Infinite finds no key at 16384**: 0 of 20"),
        ("results/smollm2-retrieval/NOTES.md", "0 of 4 at every depth, 0 of 20 in all, including depth 1"),
    ),
    *quoting_hits(
        "streaming-llm",
        ("results/smollm2-retrieval/README.md", "**StreamingLLM neither**: 0 of 20."),
        ("docs/encodings.md", "and StreamingLLM's 0 of 20 as well"),
        ("results/smollm2-retrieval/NOTES.md", "0 of 4 at every depth, 0 of 20 in all, the last depth"),
    ),
    (
        "results/smollm2-retrieval/README.md",
        "**Nor STRING**: 0 of 20, and 0 of 20 without its attention factor;",
        lambda: (
            f"**Nor STRING**: {hits_of('string', 16384, run=STRING_PASSKEY)}, and "
            f"{hits_of('string', 16384, run=STRING_PASSKEY_NO_FACTOR)} without its attention factor;"
        ),
    ),
    (
        "docs/encodings.md",
        "and finds 0 of 20 passkeys at 16384, without the factor 0 of 20",
        lambda: (
            f"and finds {hits_of('string', 16384, run=STRING_PASSKEY)} passkeys at 16384, without the factor "
            f"{hits_of('string', 16384, run=STRING_PASSKEY_NO_FACTOR)}"
        ),
    ),
    (
        "results/smollm2-retrieval/NOTES.md",
        "the true key ranked first in 2 of 20. Past 8192",
        lambda: (
            f"the true key ranked first in {hits_of('llama4-temperature', 16384, metric='rank_accuracy')}. Past 8192"
        ),
    ),
    (
        "results/smollm2/NOTES.md",
        "357.947 on the one 32768-token window, between log-n's 355.542 and RoPE's 370.622",
        lambda: (
            f"{ppl('smollm2', 'llama4-temperature', 32768):.3f} on the one 32768-token window, between log-n's "
            f"{ppl('smollm2', 'logn', 32768):.3f} and RoPE's {ppl('smollm2', 'rope', 32768):.3f}"
        ),
    ),
    (
        "docs/results.md",
        "its ratio at 8L paired over the 6 held-out documents (95% Student-t interval), and greedy\npasskey "
        "retrieval at L and 8L over 100 prompts",
        lambda: (
            "its ratio at 8L paired over the {} held-out documents (95% Student-t interval), and greedy\npasskey "
            "retrieval at L and 8L over {} prompts".format(*trained_in_counts())
        ),
    ),
    (
        "results/babilong-showcase/README.md",
        "A rule that does no reasoning, answering the last room the story names, scores 47% on qa1's stories, and a "
        "guess among the rooms the story names 29%. The score at L (n = 100 prompts, each interval's low end against "
        "the rules): after 1200 steps 37% [28–47], above neither rule; after 2400 steps 46% [36–56], above the guess",
        babilong_showcase_reading,
    ),
    ("results/babilong-showcase/README.md", "from 18% at step 40 to 38% at step 1200", lambda: babilong_probe(1200)),
    ("results/babilong-showcase/README.md", "from 20% at step 80 to 32% at step 2400", lambda: babilong_probe(2400)),
    (
        "results/babilong-showcase/README.md",
        "falls to 0% [0–4] at 2048 after either",
        lambda: (
            f"falls to {babilong_cell(2048, 1200)} at 2048 after either"
            if babilong_cell(2048, 1200) == babilong_cell(2048, 2400)
            else "the two runs differ at 2048"
        ),
    ),
    (
        "results/longppl-showcase/README.md",
        "at most 0.170% of the targets past 256 are key tokens (73 of 43,032 for RoPE at 2048, seed 1), and PI "
        "has none",
        lambda: longppl_showcase_keys(),
    ),
    (
        "results/longppl-showcase/README.md",
        "LongPPL here rests on 1 to 73 tokens a cell",
        lambda: "LongPPL here rests on {} to {} tokens a cell".format(*longppl_key_counts()),
    ),
    (
        "results/longppl-showcase/README.md",
        "their perplexity at 512 is 54.6 to 134.9",
        lambda: "their perplexity at 512 is {:.1f} to {:.1f}".format(
            *(lambda p: (p.min(), p.max()))(
                rows("longppl-showcase").query("metric == 'ppl' and eval_len == 512")["value"]
            )
        ),
    ),
    (
        "results/smollm2-longppl/README.md",
        "RoPE's LongPPL is 3.70 over 17 key tokens (0.14% of the 12,289 targets past 4096), dual chunk attention's "
        "1.67 over 11 (0.09%)",
        lambda: "RoPE's LongPPL is {} ({} of the {} targets past 4096), dual chunk attention's {} ({})".format(
            *smollm2_longppl("rope"), smollm2_longppl("rope", candidates=True), *smollm2_longppl("dual-chunk")
        ),
    ),
    (
        "results/smollm2-longppl/README.md",
        "YaRN's 1.97 over 14 (0.11%),\nStreamingLLM's 2.13 over 2 (0.02%)",
        lambda: "YaRN's {} ({}),\nStreamingLLM's {} ({})".format(
            *smollm2_longppl("yarn"), *smollm2_longppl("streaming-llm")
        ),
    ),
    (
        "docs/results.md",
        "but for the last position (31.909 against 31.905), and at 16384 it leaves RoPE's failure as it is (63.065\n"
        "against 61.344)",
        lambda: (
            f"but for the last position ({ppl('smollm2', 'llama4-temperature', 8192):.3f} against "
            f"{ppl('smollm2', 'rope', 8192):.3f}), and at 16384 it leaves RoPE's failure as it is "
            f"({ppl('smollm2', 'llama4-temperature', 16384):.3f}\nagainst {ppl('smollm2', 'rope', 16384):.3f})"
        ),
    ),
    *quoting_hits(
        "llama4-temperature",
        ("results/smollm2-retrieval/README.md", "**Nor Llama 4's attention temperature**:\n  0 of 20;"),
        ("docs/encodings.md", "it finds 0 of 20 passkeys at 16384"),
        ("docs/results.md", "it finds 0 of 20 passkeys at 16384\n([smollm2-retrieval]"),
    ),
    *quoting_hits(
        "logn",
        ("results/smollm2-retrieval/README.md", "Log-n alone keeps nothing at 16384 either**: 0 of 20"),
        ("results/smollm2-retrieval/NOTES.md", "0 of 4 at every depth, 0 of 20 in all (answers"),
    ),
    (
        "results/smollm2-retrieval/NOTES.md",
        "LM-Infinite, STRING and log-n 0 of 20 each",
        lambda: (
            "LM-Infinite, STRING and log-n "
            + " and ".join(
                sorted(
                    {
                        hits_of(e, 16384, run=FIRST_RUNS.get(e, ""))
                        for e in ("streaming-llm", "lm-infinite", "string", "logn")
                    }
                )
            )
            + " each"
        ),
    ),
    (
        "results/smollm2-retrieval/NOTES.md",
        "dual chunk attention 16 of 20,",
        lambda: f"dual chunk attention {hits_of('dual-chunk', 16384)},",
    ),
    (
        "docs/encodings.md",
        "31.65 and 31.66",
        lambda: f"{ppl('smollm2', 'streaming-llm', 16384):.2f} and {ppl('smollm2', 'lm-infinite', 16384):.2f}",
    ),
    ("docs/encodings.md", "against RoPE's 61.34", lambda: f"against RoPE's {ppl('smollm2', 'rope', 16384):.2f}"),
    (
        "docs/encodings.md",
        "(31.99 at 16384 against RoPE's 61.34;",
        lambda: (
            f"({ppl('smollm2', 'dual-chunk', 16384):.2f} at 16384 against RoPE's {ppl('smollm2', 'rope', 16384):.2f};"
        ),
    ),
    (
        "docs/encodings.md",
        "61.34 to 42.14 (39.91 without the factor)",
        lambda: (
            f"{ppl('smollm2', 'rope', 16384):.2f} to {ppl('smollm2', 'string', 16384, run=STRING[2]):.2f} "
            f"({ppl('smollm2', 'string', 16384, run=STRING_NO_FACTOR[2]):.2f} without the factor)"
        ),
    ),
    (
        "results/smollm2/NOTES.md",
        "With the factor: 33.808 at 8192 (32.590 without), 42.139 at 16384 (39.910), 241.633 at 32768 (236.837)",
        lambda: (
            "With the factor: "
            + ", ".join(
                f"{ppl('smollm2', 'string', n, run=STRING[s]):.3f} at {n} "
                f"({ppl('smollm2', 'string', n, run=STRING_NO_FACTOR[s]):.3f}{' without' if n == 8192 else ''})"
                for n, s in ((8192, 2), (16384, 2), (32768, 4))
            )
        ),
    ),
    (
        "results/smollm2-retrieval/NOTES.md",
        "the true key ranked first in 3 of 20 (4 of 20 without)",
        lambda: (
            f"the true key ranked first in {hits_of('string', 16384, run=STRING_PASSKEY, metric='rank_accuracy')} "
            f"({hits_of('string', 16384, run=STRING_PASSKEY_NO_FACTOR, metric='rank_accuracy')} without)"
        ),
    ),
    (
        "docs/encodings.md",
        "breaks outright, 241.63 (236.84 without the factor)",
        lambda: (
            f"breaks outright, {ppl('smollm2', 'string', 32768, run=STRING[4]):.2f} "
            f"({ppl('smollm2', 'string', 32768, run=STRING_NO_FACTOR[4]):.2f} without the factor)"
        ),
    ),
    (
        "docs/encodings.md",
        "L, 1.11× [1.10–1.11] RoPE's with the factor and 1.10× [1.09–1.11] without",
        lambda: (
            f"L, {ratio_cell('showcase-training-free-v2', 'string', 256)} RoPE's with the factor and "
            f"{ratio_cell('showcase-training-free-v2', 'string [attention_factor=1]', 256)} without"
        ),
    ),
    (
        "docs/encodings.md",
        "scored 65.18 at 8L against YaRN's 59.19, 1.10× YaRN's perplexity paired by document: from the "
        "reference's start (71.86 there)",
        lambda: (
            "scored "
            f"{ppl('longrope-search', 'longrope', 2048, run='65c84f'):.2f} at 8L against YaRN's "
            f"{ppl('longrope-search', 'yarn', 2048):.2f}, {longrope_against_yarn('65c84f')[:4]}× YaRN's perplexity "
            "paired by document: from the reference's start "
            f"({ppl('longrope-search', 'longrope', 2048, run='a1928c'):.2f} there)"
        ),
    ),
    (
        "docs/encodings.md",
        "8L, 94% against 62%",
        lambda: (
            f"8L, {greedy('showcase-training-free', 'ed67ee', 2048)[:3]}"
            f" against {greedy('showcase-training-free', '39d2b2', 2048)[:3]}"
        ),
    ),
    (
        "results/showcase-training-free/README.md",
        "94% [87–98] against 62% [52–72]",
        lambda: (
            greedy("showcase-training-free", "ed67ee", 2048)
            + " against "
            + greedy("showcase-training-free", "39d2b2", 2048)
        ),
    ),
    (
        "results/showcase-training-free/README.md",
        "perplexity at 8L 1.00×, 1.01× and 1.01× its value at L",
        lambda: "perplexity at 8L {}, {} and {} its value at L".format(*(flatness("dual-chunk", s) for s in (0, 1, 2))),
    ),
    (
        "results/longrope-search/README.md",
        "the found factors 1.101× [1.083–1.120], the first candidate 1.214× [1.176–1.254], the default long list "
        "0.997× [0.996–0.999], plain RoPE 1.678× [1.557–1.809]",
        lambda: (
            f"the found factors {longrope_against_yarn('65c84f')}, the first candidate "
            f"{longrope_against_yarn('a1928c')}, the default long list {longrope_against_yarn('a1cc95')}, "
            f"plain RoPE {longrope_against_yarn('751a7e')}"
        ),
    ),
    (
        "results/longrope-search/README.md",
        "the first candidate scores 61.67, the best after 4 iterations 56.02, YaRN 51.62",
        lambda: "the first candidate scores {:.2f}, the best after {} iterations {:.2f}, YaRN {:.2f}".format(
            *(lambda s: (s["initial_ppl"], s["settings"]["iterations"], s["ppl"], s["yarn_ppl"]))(
                json.loads((ROOT / "results/longrope-search/showcase-rope-s8.json").read_text())
            )
        ),
    ),
    (
        "results/smollm2/README.md",
        "| string | 33.808 | 42.139 | 1.32× |\n| string [attention_factor=1] | 32.590 | 39.910 | 1.25× |",
        lambda: (
            smollm2_row("string", STRING[2])
            + "\n"
            + smollm2_row("string", STRING_NO_FACTOR[2], "string [attention_factor=1]")
        ),
    ),
    (
        "results/smollm2/README.md",
        "| dual-chunk | 31.875 | 31.986 | 1.00× |",
        lambda: smollm2_row("dual-chunk"),
    ),
    (
        "results/smollm2/README.md",
        "| logn | 31.909 | 62.561 | 1.96× |",
        lambda: smollm2_row("logn"),
    ),
    (
        "results/smollm2/README.md",
        "| llama4-temperature | 31.909 | 63.065 | 1.98× |",
        lambda: smollm2_row("llama4-temperature"),
    ),
    (
        "results/smollm2/README.md",
        "63.065 at 16384 against RoPE's 61.344",
        lambda: (
            f"{ppl('smollm2', 'llama4-temperature', 16384):.3f} at 16384 against RoPE's "
            f"{ppl('smollm2', 'rope', 16384):.3f}"
        ),
    ),
    (
        "results/smollm2/README.md",
        "62.561 at 16384 against RoPE's 61.344",
        lambda: f"{ppl('smollm2', 'logn', 16384):.3f} at 16384 against RoPE's {ppl('smollm2', 'rope', 16384):.3f}",
    ),
    (
        "results/showcase-training-free/README.md",
        "perplexity at 8L 104.2, 128.5 and 115.0 against RoPE's 99.3, 118.1 and 107.8",
        lambda: "perplexity at 8L {} against RoPE's {}".format(
            *(
                "{:.1f}, {:.1f} and {:.1f}".format(
                    *(ppl("showcase-training-free", e, 2048, seed) for seed in (0, 1, 2))
                )
                for e in ("logn", "rope")
            )
        ),
    ),
    (
        "results/showcase-training-free/README.md",
        "retrieval at 2L 47% [37–57] and 99% [95–100] against 36% [27–46] and 97% [91–99]",
        lambda: "retrieval at 2L {} and {} against {} and {}".format(
            *(
                greedy("showcase-training-free", run, 512)
                for run in ("da510d5914", "9a14e09477", "751a7ec808", "bcf17ad376")
            )
        ),
    ),
    (
        "results/finetune-adapters/README.md",
        "| pi | 110.99 | 64.19 / 50.31 | 98.20 / 68.50 | 94.78 / 73.71 |",
        lambda: adapters_row("pi"),
    ),
    (
        "results/finetune-adapters/README.md",
        "| yarn | 57.11 | 48.27 / 46.26 | 52.20 / 47.66 | 52.89 / 48.65 |",
        lambda: adapters_row("yarn"),
    ),
    (
        "results/showcase/README.md",
        "perplexity flat past L (0.99× its value at L at 8L",
        lambda: "perplexity flat past L ({:.2f}× its value at L at 8L".format(
            ppl("showcase", "fox", 2048) / ppl("showcase", "fox", 256)
        ),
    ),
    (
        "results/showcase/README.md",
        "its perplexity at 8L is 0.99× its value at L where plain RoPE's is 2.14×",
        lambda: "its perplexity at 8L is {:.2f}× its value at L where plain RoPE's is {:.2f}×".format(
            ppl("showcase", "fox-rope", 2048) / ppl("showcase", "fox-rope", 256),
            ppl("showcase", "rope", 2048) / ppl("showcase", "rope", 256),
        ),
    ),
    (
        "results/showcase/README.md",
        "2.01× its value at L at 8L (RoPE 2.14×)",
        lambda: "{:.2f}× its value at L at 8L (RoPE {:.2f}×)".format(
            ppl("showcase", "ssmax", 2048) / ppl("showcase", "ssmax", 256),
            ppl("showcase", "rope", 2048) / ppl("showcase", "rope", 256),
        ),
    ),
    (
        "results/showcase/README.md",
        "It retrieves 100% [96–100] at L and at 2L and\n  6% [2–13] at 4L",
        lambda: (
            "It retrieves {} at L and at 2L and\n  {} at 4L".format(
                *(greedy("showcase", "cf42c2ef21", n) for n in (256, 1024))
            )
            if greedy("showcase", "cf42c2ef21", 256) == greedy("showcase", "cf42c2ef21", 512)
            else "L and 2L differ"
        ),
    ),
    (
        "results/showcase-seeds/README.md",
        "seed 0 rises to 1.18× its value at L and keeps 36% of the passkeys, seed 1 rises to 1.25× and\n  keeps 97%",
        lambda: (
            "seed 0 rises to {:.2f}× its value at L and keeps {:.0%} of the passkeys, seed 1 rises to {:.2f}× and"
            "\n  keeps {:.0%}"
        ).format(
            ppl("showcase-seeds", "rope", 512, 0) / ppl("showcase-seeds", "rope", 256, 0),
            accuracy("showcase-seeds", "751a7ec808", 512),
            ppl("showcase-seeds", "rope", 512, 1) / ppl("showcase-seeds", "rope", 256, 1),
            accuracy("showcase-seeds", "bcf17ad376", 512),
        ),
    ),
    (
        "docs/results.md",
        "the model of seed 1 keeps 97% [91–99] at 2L,\n  its perplexity there 1.25× (seed 0: 36% [27–46] at 1.18×)",
        lambda: "the model of seed 1 keeps {} at 2L,\n  its perplexity there {:.2f}× (seed 0: {} at {:.2f}×)".format(
            greedy("showcase-seeds", "bcf17ad376", 512),
            ppl("showcase-seeds", "rope", 512, 1) / ppl("showcase-seeds", "rope", 256, 1),
            greedy("showcase-seeds", "751a7ec808", 512),
            ppl("showcase-seeds", "rope", 512, 0) / ppl("showcase-seeds", "rope", 256, 0),
        ),
    ),
    (
        "results/showcase/README.md",
        "RoPE's own seeds give 36% [27–46] and 97% [91–99] at 2L",
        lambda: "RoPE's own seeds give {} and {} at 2L".format(
            greedy("showcase-seeds", "751a7ec808", 512), greedy("showcase-seeds", "bcf17ad376", 512)
        ),
    ),
    (
        "results/showcase/README.md",
        "greedy retrieval at 2L of 25% [17–35] (version 2;\n  RoPE's own seeds at version 2 give 36% [27–46] and "
        "97% [91–99]",
        lambda: "greedy retrieval at 2L of {} (version 2;\n  RoPE's own seeds at version 2 give {} and {}".format(
            greedy("showcase", "e5f0f79fdf", 512),
            greedy("showcase-seeds", "751a7ec808", 512),
            greedy("showcase-seeds", "bcf17ad376", 512),
        ),
    ),
    (
        "results/showcase/README.md",
        "perplexity 2.32× its value at L at 8L",
        lambda: (
            "perplexity "
            f"{ppl('showcase', 'rope-nope', 2048) / ppl('showcase', 'rope-nope', 256):.2f}× its value at L at 8L"
        ),
    ),
    (
        "results/showcase-seeds/README.md",
        "perplexity at 8L 0.99× its value at L for both variants in every seed, as ALiBi's; and on the five of six\n"
        "  models that retrieve at L, greedy retrieval at 8L is 80–97%, none lost (each interval reaches the bar of "
        "80),\n  where ALiBi's three fall to 35–61%. KERPLE-power's seed 1 never learned retrieval at L (0%), and "
        "KERPLE-log's\n  seed 0 retrieves 83% at L and 82% at 8L",
        kerple_text,
    ),
    (
        "results/showcase-seeds/README.md",
        "1.07–1.13×\n  at 8L against RoPE's 2.14–2.44× on the same seeds, yet its retrieval, 100% at L in every seed, "
        "is lost by 4L in\n  every seed (25%, 25%, 8%). **p-RoPE** (a quarter of the pairs unrotated) degrades as "
        "RoPE does (2.08–2.20× at\n  8L) and learns retrieval at L in one seed of three (100%; 1% and 43% in the "
        "others), losing it by 2L there\n  (46%)",
        xpos_prope_text,
    ),
    (
        "results/showcase-seeds/README.md",
        "1.18–1.25× at 8L against RoPE's 2.14–2.44× on the same seeds. One seed of three learns\n  retrieval at L "
        "(seed 1: 100%) and keeps it to 8L (100%); seeds 0 and 2 do not learn it (31% and 2%)",
        fire_text,
    ),
    (
        "results/showcase-seeds/README.md",
        "1.01–1.04× at 8L for both kinds in every seed, but at L randomized RoPE's perplexity is 1.51–1.61× plain\n"
        "  RoPE's and randomized sinusoidal's 1.63–1.95× plain sinusoidal's, seed for seed. Randomized RoPE learns\n"
        "  retrieval at L in two seeds of three (99% and 100%) and keeps it to 8L in both (97%); seed 0 ends at 66% "
        "at\n  L. Randomized sinusoidal learns it in no seed (0%, 2%, 27% at L)",
        randomized_text,
    ),
    (
        "docs/results.md",
        "FIRE learns retrieval at L in one seed of three (100%, kept to 8L: 100%) and randomized RoPE holds it at\n"
        "  L in two (99% and 100%, kept to 8L: 97% each)",
        fire_randomized_doc_text,
    ),
    (
        "docs/results.md",
        "p-RoPE learns retrieval at L in one seed of three (100%; 1% and 43% in the others) and loses it by 2L\n"
        "  there (46%), its perplexity degrading in every seed (the finding `rope-variants-across-seeds`); KERPLE-log\n"
        "  retrieves at L in every seed (83%, 100%, 100%)",
        lambda: (
            "p-RoPE learns retrieval at L in one seed of three ({}; {} and {} in the others) and loses it by 2L\n"
            "  there ({}), its perplexity degrading in every seed (the finding `rope-variants-across-seeds`); "
            "KERPLE-log\n  retrieves at L in every seed ({})"
        ).format(
            seed_pcts("p-rope", 256)[1],
            seed_pcts("p-rope", 256)[0],
            seed_pcts("p-rope", 256)[2],
            seed_pcts("p-rope", 512)[1],
            ", ".join(seed_pcts("kerple-log", 256)),
        ),
    ),
]


@pytest.mark.parametrize("document,text,computed", QUOTED, ids=[f"{d}: {t[:30]}" for d, t, _ in QUOTED])
def test_a_quoted_number_is_what_the_results_give(document, text, computed):
    said = " ".join((ROOT / document).read_text().split())  # line breaks fall anywhere in a quote
    assert " ".join(text.split()) in said, f"{document} no longer says {text!r}"
    assert computed() == text


def gpu_rows(run: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / "results" / "gpu-check" / run / "gpu_check.csv")


def gpu_ratio(part: str, encoding: str, length: int) -> str:
    t = gpu_rows("run-2")
    pick = t[(t.part == part) & (t.encoding == encoding) & (t.length == length)]
    assert len(pick) == 1, (part, encoding, length)
    return f"{float(pick.value.iloc[0]):.2f}×"


def paired_from_log(log: Path) -> dict[int, float]:
    """Our tokens/s over transformers' per length, from the eval-vs-transformers rows a bench log prints."""
    speeds: dict[tuple[str, int], float] = {}
    for line in log.read_text().splitlines():
        words = line.split()
        if words[:1] == ["eval-vs-transformers"]:
            speeds[(words[1], int(words[3]))] = float(words[4].replace(",", ""))
    return {n: speeds[("extrapolate", n)] / speeds[("transformers", n)] for (who, n) in speeds if who == "transformers"}


def test_the_gpu_check_readme_quotes_its_rows():
    text = (ROOT / "results" / "gpu-check" / "README.md").read_text()
    one = gpu_rows("run-1")
    both = pd.concat([one, gpu_rows("run-2")])
    compared = one[one.part == "cuda-vs-cpu"]
    grads = one[one.part == "cuda-vs-cpu grads"]
    worst = compared.groupby("encoding").value.max()
    held = worst[worst <= 5e-4]
    named = one[one.part.str.startswith("kernel-vs-reference")].encoding.nunique()
    assert f"hidden states of {len(held)} of the {named} encodings" in text
    assert f"within {held.max():.1e} of the CPU's" in text
    assert f"within {grads[grads.encoding.isin(held.index)].value.max():.0e} relative (run 1" in text
    kernels = both[both.part.str.startswith("kernel-vs-reference") & ~both.part.str.contains("not reached")]
    assert f"forward within {kernels[kernels.part == 'kernel-vs-reference'].value.max():.1e}" in text
    assert f"gradients within\n  {kernels[kernels.part == 'kernel-vs-reference grads'].value.max():.1e}" in text
    assert (
        f"flex ran forward and backward for {kernels[kernels.kernel.str.startswith('flex')].encoding.nunique()}" in text
    )
    memory = gpu_rows("run-2")
    memory = memory[(memory.part == "speed memory / rope") & (memory.length == 131072)].set_index("encoding").value
    assert f"within {memory.drop('dual-chunk').max():.1f}× RoPE's memory" in text
    assert f"dual chunk attention ({memory['dual-chunk']:.2f}×" in text
    after = paired_from_log(ROOT / "results" / "gpu-check" / "run-2" / "logs" / "bench.log")
    before = paired_from_log(ROOT / "results" / "gpu-check" / "run-1" / "logs" / "bench.log")
    assert f"ran {after[4096]:.2f}× transformers' tokens/s" in text
    assert f"before the fix, {before[4096]:.2f}× at 4096 down to {before[32768]:.2f}× at 32768" in text
    for name, label in [("alibi", "ALiBi"), ("kerple-log", "KERPLE-log"), ("t5", "T5"), ("rope@window", "RoPE")]:
        assert gpu_ratio("speed time / rope", name, 65536) in text, label
    for name in ("alibi@softcap", "fire"):
        assert gpu_ratio("speed time / rope", name, 65536) in text


def test_the_performance_doc_quotes_the_uncompiled_flex_peak():
    one = gpu_rows("run-1")
    peak = one[(one.part == "speed peak GiB") & (one.length == 16384)].value.max()
    assert f"({peak:.0f} GiB at 16384 tokens on the card)" in (ROOT / "docs" / "performance.md").read_text()


def _span(values) -> str:
    low, high = f"{values.min():.2f}", f"{values.max():.2f}"
    return low if low == high else f"{low}–{high}"


def test_the_performance_doc_quotes_the_fused_variants_it_measured():
    text = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    epyc = pd.read_csv(ROOT / "results" / "bench-cpus" / "epyc" / "variants.csv")
    alibi = epyc[epyc.encoding == "alibi"]
    at = {w: _span(alibi[alibi.variant.str.endswith(f"head {w}")].vs_rope) for w in (40, 48, 64)}
    by_key = _span(alibi[alibi.variant.str.endswith("key bias")].vs_rope)
    assert (
        f"ALiBi took {by_key}× RoPE's time with its bias per key, {at[40]}× at head 40, {at[48]}× at 48 and "
        f"{at[64]}× at 64" in text
    )
    assert f"and T5 {_span(epyc[epyc.encoding == 't5'].vs_rope)}× by its rows. `EXTRAPOLATE" in text
    xeon = pd.read_csv(ROOT / "results" / "bench-cpus" / "xeon-amx" / "variants.csv")
    alibi = xeon[xeon.encoding == "alibi"]
    one_call, per_head = (_span(alibi[alibi.variant.str.endswith(form)].vs_rope) for form in ("key bias", "per head"))
    t5 = _span(xeon[xeon.encoding == "t5"].vs_rope)
    assert (
        f"ALiBi takes {one_call}× RoPE's time with its keys in one call and {per_head}× per head, and T5 {t5}×" in text
    )


def test_the_performance_doc_quotes_what_the_floor_saves_and_costs():
    """The floor's figures are floor.csv's and floor-ftz.csv's; "bit for bit" is their max_difference of 0."""
    text = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    folder = ROOT / "results" / "bench-cpus" / "xeon-amx"
    kept, flushed = (
        pd.read_csv(folder / name).set_index(["encoding", "variant"]) for name in ("floor.csv", "floor-ftz.csv")
    )
    assert (kept.max_difference == 0).all() and (flushed.max_difference == 0).all()
    assert (flushed.subnormals == "flushed").all() and (kept.subnormals == "kept").all()

    def ratio(frame, name, variant):
        return f"{frame.vs_rope[(name, variant)]:.2f}×"

    assert (
        f"ALiBi takes {ratio(kept, 'alibi', 'no floor')} RoPE's time without the floor and "
        f"{ratio(kept, 'alibi', 'floor')} with it, FoX {ratio(kept, 'fox', 'no floor')} and "
        f"{ratio(kept, 'fox', 'floor')}, the outputs bit for bit the same" in text
    )
    assert (
        f"{ratio(flushed, 'alibi', 'no floor')} and {ratio(flushed, 'alibi', 'floor')} (ALiBi), "
        f"{ratio(flushed, 'fox', 'no floor')} and {ratio(flushed, 'fox', 'floor')} (FoX)" in text
    )


def test_the_performance_doc_quotes_the_xeon_before_the_floor_from_the_notes():
    import re

    notes = " ".join((ROOT / "results" / "bench-cpus" / "NOTES.md").read_text().split())
    before = re.search(r"the first bench of the sitting .*? gave ALiBi ([\d.]+)× and T5", notes).group(1)
    text = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    assert f"On the Xeon the kernels of the EPYC rows took ALiBi to {before}× RoPE's time" in text


def test_the_seeds_readme_quotes_t5s_three_seeds():
    from extrapolate.reproduce.findings import ppl_of_seed, seed_cell

    text = " ".join((ROOT / "results" / "showcase-seeds" / "README.md").read_text().split())

    def rises(encoding: str) -> list[str]:
        return [
            f"{ppl_of_seed('showcase-seeds', encoding, 2048, s) / ppl_of_seed('showcase-seeds', encoding, 256, s):.2f}×"
            for s in (0, 1, 2)
        ]

    at_8l = [f"{seed_cell('showcase-seeds', 't5', 2048, s).mean:.0%}" for s in (0, 1, 2)]
    assert f"at 8L is {at_8l[0]}, {at_8l[1]} and {at_8l[2]} (100 prompts each)" in text
    t5, rope = rises("t5"), rises("rope")
    assert f"({t5[0]}, {t5[1]} and {t5[2]} its value at L at 8L), less than RoPE's ({', '.join(rope)})" in text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_seeds_notes_quote_nopes_seeds(seed):
    from extrapolate.reproduce.findings import ppl_of_seed, seed_cell

    text = " ".join((ROOT / "results" / "showcase-seeds" / "NOTES.md").read_text().split())
    at_l, at_8l = ppl_of_seed("showcase-seeds", "nope", 256, seed), ppl_of_seed("showcase-seeds", "nope", 2048, seed)
    assert f"Perplexity {at_l:.3f} at L and {at_8l:.3f} at 8L ({at_8l / at_l:.2f}×)".lower() in text.lower()
    greedy = " / ".join(f"{seed_cell('showcase-seeds', 'nope', n, seed).mean:.0%}" for n in (256, 512, 1024, 2048))
    assert f"greedy retrieval {greedy} at L / 2L / 4L / 8L" in text


def test_the_seeds_notes_quote_learneds_seeds():
    from extrapolate.reproduce.findings import ppl_of_seed, seed_cell

    text = " ".join((ROOT / "results" / "showcase-seeds" / "NOTES.md").read_text().split())
    ppl = [f"{ppl_of_seed('showcase-seeds', 'learned', 256, s):.3f}" for s in (0, 1, 2)]
    assert f"Perplexity at L {ppl[0]}, {ppl[1]} and {ppl[2]} at seeds 0, 1 and 2" in text
    greedy = [f"{seed_cell('showcase-seeds', 'learned', 256, s).mean:.0%}" for s in (0, 1, 2)]
    assert f"greedy retrieval at L {greedy[0]}, {greedy[1]} and {greedy[2]} (100 prompts each" in text
    readme = " ".join((ROOT / "results" / "showcase-seeds" / "README.md").read_text().split())
    assert f"greedy retrieval at L is {greedy[0]}, {greedy[1]} and {greedy[2]} at seeds 0, 1 and 2" in readme


def test_the_gpu_notes_quote_the_profiles():
    """The profiles' totals that NOTES.md gives as the cause of the slow evaluation."""
    import re

    folder = ROOT / "results" / "gpu-check" / "run-1" / "bench" / "profiles"

    def total(who: str, what: str) -> float:
        text = (folder / f"eval-vs-transformers-{who}-rope-32768.txt").read_text()
        return float(re.search(rf"Self {what} time total: ([\d.]+)ms", text).group(1))

    notes = " ".join((ROOT / "results" / "gpu-check" / "NOTES.md").read_text().split())
    ours, theirs = total("extrapolate", "CUDA"), total("transformers", "CUDA")
    assert f"({ours:.1f} ms against {theirs:.1f} ms)" in notes
    assert f"the CPU busy for {total('extrapolate', 'CPU'):.0f} ms" in notes


def test_the_longrope_readme_quotes_the_smollm2_search():
    import json

    found = json.loads((ROOT / "results/longrope-search/smollm2-s2.json").read_text())
    text = " ".join((ROOT / "results/longrope-search/README.md").read_text().split())
    quoted = (
        f"At 16384 the found factors score {found['ppl']:.3f}, LongRoPE's start (the reference's first candidate) "
        f"{found['initial_ppl']:.3f} and YaRN {found['yarn_ppl']:.3f}"
    )
    assert quoted in text and found["target"] == 16384 and found["factor"] == 2
    spread = max(found["ppl"], found["initial_ppl"], found["yarn_ppl"]) / min(found["ppl"], found["initial_ppl"])
    assert spread < 1.10  # inside the 10% margin: "not ranked" is what the numbers allow


def test_the_longrope_readme_quotes_the_smollm2_rows():
    text = " ".join((ROOT / "results/longrope-search/README.md").read_text().split())
    found, start, default = (
        lambda n, r=r: ppl("smollm2", "longrope", n, run=r) for r in ("d093b2", "b74df5", "ef3871")
    )
    quoted = (
        f"at 16384 the found factors {found(16384):.3f} (`longrope #d093b2`), the start {start(16384):.3f} "
        f"(`longrope #b74df5`), the default long list (YaRN's ramp as factors, `longrope #ef3871`) "
        f"{default(16384):.3f}, YaRN {ppl('smollm2', 'yarn', 16384):.3f}; at 8192 every LongRoPE row "
        f"{found(8192):.3f}"
    )
    assert quoted in text and found(8192) == start(8192) == default(8192)
    assert f"against RoPE's {ppl('smollm2', 'rope', 8192):.3f}" in text
    # the rows measure the factors the committed search printed, and its first candidate
    import json

    search = json.loads((ROOT / "results/longrope-search/smollm2-s2.json").read_text())
    for run, factors in (("d093b2", search["long_factor"]), ("b74df5", search["candidates"][0]["long_factor"])):
        record = next((ROOT / "results/smollm2/runs").glob(f"{run}*.json"))
        options = dict(json.loads(record.read_text())["request"]["encoding_options"])
        assert options["long_factor"] == pytest.approx(factors, abs=5e-7)


def test_the_vllm_parity_readme_quotes_its_comparison():
    """results/vllm-parity: the shares README.md gives, recomputed from both folders' samples, and parity.csv
    the table `scripts/backend_parity.py` makes from them."""
    from tests.helpers import load_script

    parity = load_script("backend_parity")
    folder = ROOT / "results" / "vllm-parity"
    table = parity.compared(parity.answers(ROOT / "results" / "smollm2-ruler-25"), parity.answers(folder))
    written = pd.read_csv(folder / "parity.csv")
    pd.testing.assert_frame_equal(table.reset_index(drop=True), written, check_dtype=False)
    prompts = int(table.prompts.sum())
    same = round(float((table.identical * table.prompts).sum()))
    alike = round(float((table.same_score * table.prompts).sum()))
    text = " ".join((folder / "README.md").read_text().split())
    assert f"{alike} of {prompts} prompts score alike ({alike / prompts:.1%})" in text
    assert f"identical for {same / prompts:.1%} of prompts** ({same} of {prompts};" in text
    floats = parity.compared(parity.answers(folder / "float32-native"), parity.answers(folder / "float32-vllm"))
    identical = round(float(floats.identical.iloc[0] * floats.prompts.iloc[0]))
    assert f"identical predictions for {identical} of {int(floats.prompts.iloc[0])} prompts" in text


@pytest.mark.parametrize("doc", ["results/showcase-vt-learned/README.md", "docs/results.md"])
def test_the_vt_learned_table_is_quoted_row_by_row(doc):
    folder = "showcase-vt-learned"
    table = rows(folder)
    text = (ROOT / doc).read_text()
    for encoding in ("rope", "alibi"):
        ruler = table[(table.encoding == encoding) & (table.kind == "ruler")].set_index("eval_len")
        r = ruler.loc[[256, 512, 1024, 2048], ["value", "ci_low", "ci_high"]] * 100
        cells = " | ".join(f"{v:.0f} [{lo:.0f}–{hi:.0f}]" for v, lo, hi in r.itertuples(index=False))
        grown = ppl(folder, encoding, 2048) / ppl(folder, encoding, 256)
        assert f"| {encoding} | {cells} | {grown:.2f}× |" in text


@pytest.mark.parametrize("doc", ["results/showcase-vt/README.md", "docs/results.md"])
def test_the_vt_table_is_quoted_row_by_row_with_its_intervals(doc):
    folder = "showcase-vt"
    table = rows(folder)
    text = (ROOT / doc).read_text()
    for encoding in ("rope", "alibi", "yarn", "dynamic-yarn", "self-extend"):
        label = "yarn (s = 8)" if encoding == "yarn" else encoding
        ruler = table[(table.encoding == encoding) & (table.kind == "ruler")].set_index("eval_len")
        r = ruler.loc[[256, 512, 1024, 2048], ["value", "ci_low", "ci_high"]] * 100
        cells = " | ".join(f"{v:.1f} [{lo:.0f}–{hi:.0f}]" for v, lo, hi in r.itertuples(index=False))
        assert f"| {label} | {cells} |" in text, encoding


@pytest.mark.parametrize("doc", ["results/smollm2-ruler/README.md", "docs/results.md"])
def test_the_smollm2_ruler_table_is_quoted_row_by_row_with_its_intervals(doc):
    folder = "smollm2-ruler"
    table = rows(folder)
    table = table[(table.encoding == "rope") & (table.kind == "ruler") & (table.metric == "score")]
    text = (ROOT / doc).read_text()
    lengths = [1024, 2048, 4096, 8192]
    for task, cells in table.groupby(table.protocol.str.split("-v2-").str[0]):
        r = cells.set_index("eval_len").loc[lengths, ["value", "ci_low", "ci_high"]] * 100
        quoted = " | ".join(f"{v:.1f} [{lo:.0f}–{hi:.0f}]" for v, lo, hi in r.itertuples(index=False))
        assert f"| `{task}` | {quoted} |" in text, task
    cwe = table[table.protocol.str.startswith("cwe-")].set_index("eval_len")  # partial credit: at its mean
    assert cwe.loc[1024, "ci_method"] == "clopper-pearson-at-mean"
    # "every cell from 60 to 100 has an interval across that bar"
    inside = table[(table.eval_len <= 8192) & (table.value >= 0.6)]
    assert ((inside.ci_low < 0.856) & (inside.ci_high >= 0.856)).all()


def test_the_smollm2_readme_tables_the_cells_at_four_times_the_context():
    text = (ROOT / "results" / "smollm2" / "README.md").read_text()
    from extrapolate.report.run_options import with_options

    table = label_variants(with_options(rows("smollm2"), ROOT / "results" / "smollm2"))
    at = table[(table.eval_len == 32768) & (table.metric == "ppl")].set_index("encoding")["value"]
    inside = ppl("smollm2", "rope", 8192)
    assert len(at) == 9
    for label, value in at.items():
        assert f"| {label} | {value:.3f} | {value / inside:.2f}× |" in text


def test_the_encodings_doc_quotes_smollm2_at_four_times_the_context():
    text = " ".join((ROOT / "docs" / "encodings.md").read_text().split())
    table = rows("smollm2")
    at = table[(table.eval_len == 32768) & (table.metric == "ppl")].set_index("encoding")["value"]
    assert f"both still hold perplexity: {at['streaming-llm']:.2f} and {at['lm-infinite']:.2f}" in text
    assert f"context, {at['dual-chunk']:.2f} against RoPE's {at['rope']:.2f}" in text
    dual = hits_of("dual-chunk", 16384)
    assert f"finds {dual} passkeys, RoPE's count at 8192" in text and dual == hits_of("rope", 8192)


def test_the_smollm2_notes_quote_the_cells_at_four_times_the_context():
    text = " ".join((ROOT / "results" / "smollm2" / "NOTES.md").read_text().split())
    table = rows("smollm2")
    table = table[~table.run_id.str[:6].isin(STRING.values())]  # the history predates STRING's factor
    at = table[(table.eval_len == 32768) & (table.metric == "ppl")].set_index("encoding")["value"]
    assert f"Dual chunk attention {at['dual-chunk']:.3f} and LM-Infinite {at['lm-infinite']:.3f} at 32768" in text
    assert f"RoPE's {ppl('smollm2', 'rope', 8192):.3f} at its 8192" in text
    assert max(at["dual-chunk"], at["lm-infinite"]) <= 1.1 * ppl("smollm2", "rope", 8192)
    assert (
        f"Log-n next: {at['logn']:.3f} at 32768, as broken as its {ppl('smollm2', 'logn', 16384):.3f} at 16384" in text
    )
    assert (
        f"Plain RoPE next: {at['rope']:.3f} at 32768, against its {ppl('smollm2', 'rope', 16384):.3f} at 16384"
        f" and {ppl('smollm2', 'rope', 8192):.3f} at 8192" in text
    )
    assert min(at["rope"], at["logn"]) > 10 * max(at["dual-chunk"], at["lm-infinite"])
    assert f"StreamingLLM next: {at['streaming-llm']:.3f} at 32768" in text
    assert at["streaming-llm"] <= 1.1 * ppl("smollm2", "rope", 8192)
    assert f"STRING next: {at['string']:.3f} at 32768" in text
    assert at["string"] >= 1.5 * ppl("smollm2", "rope", 8192)


def test_the_results_doc_names_the_unresolved_differences_with_their_numbers():
    text = " ".join((ROOT / "docs" / "results.md").read_text().split())
    assert "the window methods at 32768 on SmolLM2 against RoPE inside its context" in text
    table = rows("smollm2-ruler-25")
    single_2 = table[
        (table.eval_len == 8192) & table.protocol.str.startswith("niah_single_2-v") & (table.status == "ok")
    ]
    chat = single_2[single_2.protocol.str.endswith("+chat")].iloc[0]
    plain = single_2[~single_2.protocol.str.endswith("+chat")].iloc[0]

    def cell(r) -> str:
        return f"{r.value * 100:.0f} [{r.ci_low * 100:.0f}–{r.ci_high * 100:.0f}]"

    from extrapolate.report.paired import chat_differences

    paired = chat_differences(ROOT / "results" / "smollm2-ruler-25").set_index(["protocol", "eval_len"])
    d = paired.loc[(plain.protocol, 8192)]
    shown = f"{100 * d.difference:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}] paired"
    assert f"`niah_single_2` at 8192: {cell(chat)} against {cell(plain)}, {shown}" in text
    assert d.low <= 0 <= d.high  # paired, the difference still includes 0: not resolved


def test_the_reference_notes_per_seed_claims_follow_from_the_per_seed_file():
    import numpy as np

    text = (ROOT / "results" / "reference" / "NOTES.md").read_text()
    per_seed = pd.read_csv(ROOT / "results" / "reference" / "spread-seeds.csv")
    nll = per_seed[per_seed.metric == "nll"].pivot_table(index=["encoding", "eval_len"], columns="seed", values="value")
    L = 128

    def ratios(a: tuple, b: tuple) -> np.ndarray:
        return np.exp(nll.loc[a] - nll.loc[b]).to_numpy()

    def listed(values) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    def span(values, digits: int) -> str:
        return f"{values.min():.{digits}f}–{values.max():.{digits}f}"

    assert f"| sinusoidal ppl at 8L / at L | {listed(ratios(('sinusoidal', 8 * L), ('sinusoidal', L)))} |" in text
    assert f"| RoPE ppl at 8L / at L | {listed(ratios(('rope', 8 * L), ('rope', L)))} |" in text
    assert f"| ALiBi ppl at 8L / at L | {span(ratios(('alibi', 8 * L), ('alibi', L)), 3)} |" in text
    assert f"| NTK ppl / RoPE ppl at 4L | {span(ratios(('ntk', 4 * L), ('rope', 4 * L)), 2)} |" in text
    assert f"| YaRN ppl / RoPE ppl at 8L | {span(ratios(('yarn', 8 * L), ('rope', 8 * L)), 2)} |" in text
    spread = pd.read_csv(ROOT / "results" / "reference" / "spread.csv").set_index(
        ["encoding", "eval_len", "task", "metric"]
    )
    again = per_seed[per_seed.status == "ok"].groupby(["encoding", "eval_len", "task", "metric"])["value"].std()
    assert again.loc[spread.index].tolist() == pytest.approx(spread["sd"].tolist(), rel=1e-4, abs=1e-9)


def test_the_chat_template_comparison_is_what_the_notes_say_unpaired_and_paired():
    """The last NOTES entry of smollm2-ruler-25 names the +chat cells whose own interval is disjoint from its
    plain twin's, the cells whose paired interval excludes 0, and those whose Holm-adjusted p-value over every
    paired cell is below 0.05, each as the results give them."""
    from extrapolate.report.paired import chat_differences, moved, moved_over_family

    folder = ROOT / "results" / "smollm2-ruler-25"
    table = rows("smollm2-ruler-25")
    table = table.assign(name=table.protocol.str.split("-v").str[0], chat=table.protocol.str.endswith("+chat"))
    notes = " ".join((folder / "NOTES.md").read_text().split())
    last = notes.rsplit("## ", 1)[1]
    chat = table[table.chat].set_index(["name", "eval_len"])
    plain = table[~table.chat].set_index(["name", "eval_len"])
    tasks = sorted(set(chat.index.get_level_values(0)))
    assert f"{len(tasks)} of the eleven tasks are in." in last

    def cell(row) -> str:
        return f"{row.value * 100:.0f} [{row.ci_low * 100:.0f}–{row.ci_high * 100:.0f}]"

    apart = [
        f"{name} at {length} ({cell(chat.loc[(name, length)])} against {cell(plain.loc[(name, length)])})"
        for name, length in chat.index
        if chat.ci_low[(name, length)] > plain.ci_high[(name, length)]
        or plain.ci_low[(name, length)] > chat.ci_high[(name, length)]
    ]
    unpaired = last.split("Unpaired, ", 1)[1].split(". Paired", 1)[0]
    if apart:
        assert unpaired.startswith(f"{len(apart)} of {len(chat)} +chat cells' interval")
        for one in apart:  # "vt at 1024 (…)", said so or as "and at 2048 (…)" after its task's first cell
            task, rest = one.split(" at ", 1)
            assert task in unpaired and rest in unpaired, one
    else:
        assert unpaired.startswith("every +chat cell's interval overlaps its plain one")
    paired = chat_differences(folder)
    assert len(paired) == len(chat)  # every +chat cell has its plain twin on the same prompts
    shown = [
        f"{r['protocol'].split('-v')[0]} at {r['eval_len']}"
        f" ({100 * r['difference']:+.1f} [{100 * r['low']:+.1f}, {100 * r['high']:+.1f}])"
        for r in paired.to_dict("records")
        if moved(r)
    ]
    said = last.split("Paired, ", 1)[1].split(". With", 1)[0]
    assert said.startswith(f"{len(shown)} of {len(paired)} cells move with confidence: ")
    for one in shown:  # "fwe at 2048 (+13.3 …)", said as "fwe at 2048 (+13.3 …)" or "and at 8192 (…)"
        task, rest = one.split(" at ", 1)
        assert task in said and rest in said, one
    family = [r for r in paired.to_dict("records") if moved_over_family(r)]
    over = last.split("Over the family, ", 1)[1].split(";", 1)[0]
    assert over.startswith(f"{len(family)} of {len(paired)} cells move")
    for r in family:
        assert f"{r['protocol'].split('-v')[0]} at {r['eval_len']} (p {r['p']:.4f}, adjusted {r['p_holm']:.3f})" in over
    following = sorted(r["p_holm"] for r in paired.to_dict("records") if not moved_over_family(r))[0]
    assert f"has an adjusted p of {following:.2f}" in last


def test_the_smollm2_ruler_readme_tables_the_newer_methods_at_16384():
    text = (ROOT / "results" / "smollm2-ruler" / "README.md").read_text()
    table = rows("smollm2-ruler")
    cells = table[(table.eval_len == 16384) & ~table.encoding.isin(["rope", "yarn"])]
    assert len(cells) >= 2
    for r in cells.itertuples():
        assert f"| {r.encoding} | {r.value * 100:.0f} [{r.ci_low * 100:.0f}–{r.ci_high * 100:.0f}] |" in text


def test_the_finetune_folder_shares_plain_ropes_rows_with_showcase_seeds_exactly():
    """finetune-seeds' README: its plain RoPE rows at 0 steps are showcase-seeds' runs, equal to them."""
    key = ["run_id", "eval_len", "task", "metric", "depth"]
    shared = rows("finetune-seeds").merge(rows("showcase-seeds"), on=key, suffixes=("_here", "_there"))
    assert len(shared) > 0 and set(shared.encoding_here) == {"rope"}
    assert (shared.value_here == shared.value_there).all()
    text = " ".join((ROOT / "results" / "finetune-seeds" / "NOTES.md").read_text().split())
    assert f"at 1024 here, {ppl('finetune-seeds', 'rope', 1024, run='751a7ec808'):.3f}, is that folder's value" in text


def finetune_seeds_row(encoding: str) -> str:
    """A row of docs/results.md's three-seed fine-tuning table: perplexity at 1024 after 0, 25, 100 and 400
    steps, the mean over the seeds with Student's t interval over them."""
    from extrapolate.report.stats import seeds_interval

    t = rows("finetune-seeds")
    t = t[(t.encoding == encoding) & (t.eval_len == 1024) & (t.metric == "ppl")]
    t = t[t.finetune_positions.isna() & t.finetune_loss.isna()]  # the fine-tunes on rows of L' by cross-entropy
    cells = []
    for steps in (0, 25, 100, 400):
        values = t[t.finetune_steps == steps].sort_values("seed").value.tolist()
        assert len(values) == 3, (encoding, steps)
        mean, _, low, high = seeds_interval(values)
        cells.append(f"{mean:.1f} [{low:.1f}–{high:.1f}]")
    name = "rope (no scaling)" if encoding == "rope" else encoding
    return f"| {name} | " + " | ".join(cells) + " |"


@pytest.mark.parametrize("encoding", ["rope", "pi", "ntk", "yarn"])
def test_the_three_seed_finetune_table_is_quoted_row_by_row(encoding):
    text = (ROOT / "docs" / "results.md").read_text()
    assert finetune_seeds_row(encoding) in text


def test_the_three_seed_finetune_text_is_what_the_table_gives():
    text = " ".join((ROOT / "docs" / "results.md").read_text().split())
    t = rows("finetune-seeds")
    start = t[(t.metric == "ppl") & (t.eval_len == 1024) & (t.finetune_steps == 0)]

    def at(encoding: str, seed: int) -> float:
        return float(start[(start.encoding == encoding) & (start.seed == seed)].value.iloc[0])

    above = [at("ntk", s) / at("yarn", s) - 1 for s in (0, 2)]
    assert (
        f"(YaRN {at('yarn', 1):.1f} against NTK {at('ntk', 1):.1f} on seed 1, NTK {above[0]:.1%} and "
        f"{above[1]:.1%} above YaRN on the others)" in text
    )
    plain = t.finetune_positions.isna() & t.finetune_loss.isna() & t.encoding.isin(["rope", "pi", "ntk", "yarn"])
    late = t[plain & (t.metric == "accuracy") & (t.seed == 2) & (t.finetune_steps == 400)]  # the four full fine-tunes
    cells = late.groupby(["encoding", "eval_len"]).apply(lambda g: (g.value * g.n).sum() / g.n.sum())
    assert set(late.eval_len) == {256, 1024} and late.encoding.nunique() == 4
    assert (
        f"its cells are {cells.min():.0%}–{cells.max():.0%} at 256 and 1024 for every encoding".replace("0%–", "0–")
        in text
    )


def test_the_finetune_notes_say_where_yarn_and_ntk_part():
    text = " ".join((ROOT / "results" / "finetune-seeds" / "NOTES.md").read_text().split())
    t = rows("finetune-seeds")
    start = t[(t.metric == "ppl") & (t.eval_len == 1024) & (t.finetune_steps == 0) & (t.seed == 1)]
    yarn, ntk = (float(start[start.encoding == e].value.iloc[0]) for e in ("yarn", "ntk"))
    assert f"NTK starts {ntk / yarn - 1:.1%} above YaRN at 1024 ({ntk:.1f} against {yarn:.1f})" in text
    assert ntk / yarn - 1 > 0.10
    four = t[t.encoding.isin(["rope", "pi", "ntk", "yarn"]) & t.finetune_positions.isna() & t.finetune_loss.isna()]
    assert f"{four.run_id.nunique()} runs, every one with its answers" in " ".join(
        (ROOT / "results" / "finetune-seeds" / "README.md").read_text().split()
    )


def test_the_readme_quotes_the_training_speed_of_the_run_records_it_links():
    """The quick start's training times: each figure is its linked run record's."""
    import json
    import re

    text = " ".join((ROOT / "README.md").read_text().split())
    quotes = re.findall(
        r"(?:(\d+) s at )?([\d,]+) tokens/s[^(]*\(\[run record\]\((results/showcase/runs/\w+\.json)\)", text
    )
    assert len(quotes) == 2
    for seconds, speed, record in quotes:
        training = json.loads((ROOT / record).read_text())["training"]
        assert speed == f"{training['tokens_per_second']:,.0f}", record
        assert not seconds or seconds == f"{training['train_seconds']:.0f}", record


def test_the_first_finetune_table_is_quoted_row_by_row_with_its_intervals():
    """docs/results.md's one-seed fine-tune table: perplexity at L' (its interval over documents where the
    documents' losses are kept; these rows' are to be measured again, so the table gives none yet)."""
    table = rows("finetune")
    table = table[(table.metric == "ppl") & (table.eval_len == 1024)]
    text = (ROOT / "docs" / "results.md").read_text()
    for encoding, label in (("rope", "rope (no scaling)"), ("pi", "pi"), ("ntk", "ntk"), ("yarn", "yarn")):
        cells = table[table.encoding == encoding].set_index("finetune_steps").loc[[0, 25, 100, 400]]
        quoted = " | ".join(
            f"{r.value:.3f}" + ("" if pd.isna(r.ci_low) else f" [{r.ci_low:.1f}–{r.ci_high:.1f}]")
            for r in cells.itertuples()
        )
        assert f"| {label} | {quoted} |" in text, encoding
    assert cells.n.nunique() == 1 and f"the {int(cells.n.iloc[0])} held-out documents" in text


def finetune_seed(
    encoding: str, seed: int, pose: bool = False, length: int = 1024, longce: bool = False, intervals: bool = False
) -> str:
    """A seed's perplexity at `length` after 0 / 25 / 100 / 400 steps in results/finetune-seeds ("–" where a
    step was not measured on its own: PoSE's and LongCE's zero-step point is YaRN's), with `intervals` each
    cell's 95% interval over the documents where its row keeps one."""
    t = rows("finetune-seeds")
    t = t[(t.seed == seed) & (t.encoding == encoding) & (t.eval_len == length) & (t.metric == "ppl")]
    t = t[t.finetune_positions.eq("pose")] if pose else t[t.finetune_positions.isna()]
    t = t[t.finetune_loss.eq("longce")] if longce else t[t.finetune_loss.isna()]
    cells = [t[t.finetune_steps == steps] for steps in (0, 25, 100, 400)]

    def cell(row) -> str:
        spread = intervals and not pd.isna(row.ci_low)
        return f"{row.value:.2f}" + (f" [{row.ci_low:.1f}–{row.ci_high:.1f}]" if spread else "")

    return " / ".join(cell(c.iloc[0]) if len(c) else "–" for c in cells)


FINETUNE_MODES = (
    ("YaRN fine-tuned at L'", dict(encoding="yarn")),
    ("YaRN by PoSE", dict(encoding="yarn", pose=True)),
    ("YaRN with LongCE", dict(encoding="yarn", longce=True)),
    ("DroPE", dict(encoding="drope")),
)


def finetune_modes_table() -> str:
    """finetune-seeds' README table: each fine-tune's perplexity at 1024 after 0 / 25 / 100 / 400 steps, seed by
    seed, for the seeds where PoSE, LongCE and DroPE are all measured."""
    t = rows("finetune-seeds")
    pose, longce = t[t.finetune_positions.eq("pose")], t[t.finetune_loss.eq("longce")]
    seeds = sorted(set(pose.seed) & set(longce.seed) & set(t[t.encoding == "drope"].seed))
    lines = ["| perplexity at 1024 | seed | 0 steps | 25 | 100 | 400 |", "|---|---|---|---|---|---|"]
    for label, mode in FINETUNE_MODES:
        for seed in seeds:
            cells = finetune_seed(seed=seed, intervals=True, **mode).replace(" / ", " | ")
            lines.append(f"| {label} | {seed} | {cells} |")
    return "\n".join(lines)


def test_the_finetune_readme_quotes_pose_drope_and_longce_seed_by_seed():
    text = " ".join((ROOT / "results" / "finetune-seeds" / "README.md").read_text().split())
    assert " ".join(finetune_modes_table().split()) in text
    t = rows("finetune-seeds")
    seeds = sorted(set(t[t.finetune_loss.eq("longce")].seed))
    assert seeds == [0, 1, 2] and "Seeds 0, 1 and 2, each from the same RoPE model" in text

    from extrapolate.reproduce.findings.cells import ppl_of_seed, ratios

    def over_full(label: str) -> str:  # each seed's perplexity at 1024 after 400 steps over the full fine-tune's
        at = {
            name: [ppl_of_seed("finetune-seeds", f"{name}+ft400", 1024, s) for s in seeds] for name in (label, "yarn")
        }
        return ratios(mode / full for mode, full in zip(at[label], at["yarn"]))

    assert f"PoSE at {over_full('yarn+pose')} its perplexity" in text
    assert f"LongCE at {over_full('yarn+longce')}, its weight" in text
    assert f"DroPE stays far above it ({over_full('drope')})" in text
    pose = [
        float(p) - float(c)
        for s in seeds
        for p, c in zip(finetune_seed("yarn", s, pose=True).split(" / ")[1:], finetune_seed("yarn", s).split(" / ")[1:])
    ]
    assert "above it at some steps and seeds, below at others" in text and min(pose) < 0 < max(pose)
    drope_at_l = finetune_seed("drope", 0, length=256).split(" / ")
    rope_at_l = finetune_seed("rope", 0, length=256).split(" / ")[0]
    assert f"(on seed 0 {drope_at_l[0]} at L against {rope_at_l})" in text and f"({drope_at_l[3]} at 256" in text
    assert f"{finetune_seed('drope', 0).split(' / ')[3]} at 1024 after 400" in text
    zero = t[(t.seed == 0) & (t.encoding == "drope") & (t.finetune_steps == 0) & (t.metric == "accuracy")]
    assert f"{zero[zero.eval_len == 1024]['value'].mean():.0%} of the prompts" in text
    documents = t[t.finetune_loss.eq("longce") & (t.metric == "ppl")]
    assert documents.n.nunique() == 1 and documents.n_tokens.nunique() == 1
    assert f"over the {documents.n.iloc[0]} held-out documents ({documents.n_tokens.iloc[0]:,} tokens)" in text


def test_the_results_doc_holds_the_2025_methods_table_and_its_reading():
    """docs/results.md's table of the 2025 trained-in methods and the sentence reading it, as the rows give them."""
    doc = " ".join((ROOT / "docs" / "results.md").read_text().split())
    assert " ".join(trained_in_table().split()) in doc
    assert " ".join(trained_in_reading().split()) in doc


def test_the_smollm2_babilong_readme_reads_every_cell_below_the_bar_by_its_interval():
    """Its README says every cell in is below RULER's bar of 85.6, the interval's top too (a verdict from the
    intervals), and that each cell holds 25 prompts."""
    text = (ROOT / "results" / "smollm2-babilong" / "README.md").read_text()
    assert "below the bar (its interval's top too)" in text and "25 prompts a cell" in text
    t = rows("smollm2-babilong").query("metric == 'score'")
    assert len(t) and (t.ci_high < 0.856).all() and (t.n == 25).all()
    assert (t.ci_method == "clopper-pearson").all()
