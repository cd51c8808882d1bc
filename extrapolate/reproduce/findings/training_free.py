"""The findings on the training-free methods and the fine-tunes of the three-seed RoPE models
(`results/showcase-training-free`, `results/finetune-seeds`)."""

from __future__ import annotations

from extrapolate.report.stats import seeds_interval
from extrapolate.reproduce.findings import cells as shared
from extrapolate.reproduce.findings.cells import (
    DEGRADES,
    PPL_MARGIN,
    STRING_AS_STATED,
    AcrossSeeds,
    Outcome,
    at_least_over,
    below_over,
    by_depth,
    depth_cells,
    flat_over,
    held,
    lost,
    outcome,
    ppl_of_seed,
    ratios,
    retrieves,
    seed_cell,
    seed_rises,
)


def self_extend() -> Outcome:
    """Self-Extend on the three RoPE models: perplexity flat to 8L in every seed, and retrieval held at every
    length from L to 8L on every seed whose RoPE model retrieves at L (the validity rule)."""
    folder, lengths = "showcase-training-free", (256, 512, 1024, 2048)
    extended, rope = AcrossSeeds.of("self-extend", folder), AcrossSeeds.of("rope", folder)
    learned = [s for s in rope.seeds if retrieves(rope.at_l[s])]
    cells = {s: [seed_cell(folder, "self-extend", n, s) for n in lengths] for s in learned}
    out = [str(s) for s in rope.seeds if s not in learned]
    left = f"; seed {', '.join(out)} left out: its RoPE model does not retrieve at L" if out else ""
    numbers = (
        "perplexity at 8L / at L: "
        + ratios(extended.rise[s] for s in extended.seeds)
        + f" (seeds {', '.join(map(str, extended.seeds))}); greedy at L…8L: "
        + "; ".join(f"seed {s} " + " / ".join(map(str, cells[s])) for s in learned)
        + f" (n = {cells[learned[0]][0].n} a length{left})"
        if learned
        else "no RoPE model retrieves at L"
    )
    checks = {
        "three seeds": len(extended.seeds) == 3,
        "a RoPE model retrieves at L": bool(learned),
        "perplexity flat at every length over the seeds": all(
            flat_over(
                ppl_of_seed(folder, "self-extend", n, s) / ppl_of_seed(folder, "self-extend", 256, s)
                for s in extended.seeds
            )
            for n in lengths
        ),
        **{f"held at every length, seed {s}": all(held(c) for c in cells[s]) for s in learned},
    }
    return outcome(checks, numbers)


def finetune_across_seeds() -> Outcome:
    """Fine-tuning at L' = 4L from each seed's RoPE model: where each scaling starts and where it ends against
    plain RoPE fine-tuned the same way, seeds as the unit: each seed's perplexity at L' over RoPE's (the same
    base model, the same documents), decided on the 95% interval of those ratios over the seeds with the 10%
    margin; the end by each seed's largest-to-smallest ratio of the four after 400 steps."""
    folder, steps = "finetune-seeds", {0: "", 25: "+ft25", 400: "+ft400"}
    names = {"yarn": "YaRN", "ntk": "NTK", "rope": "RoPE", "pi": "PI"}
    seeds = sorted(int(s) for s in shared.table(folder)["seed"].unique())
    at = {
        (e, k, s): ppl_of_seed(folder, e + suffix, 1024, s) for e in names for k, suffix in steps.items() for s in seeds
    }

    def over(e: str, k: int) -> str:
        mean, _, low, high = seeds_interval([at[e, k, s] for s in seeds])
        return f"{mean:.1f} [{low:.1f}–{high:.1f}]"

    start = {e: [at[e, 0, s] / at["rope", 0, s] for s in seeds] for e in ("yarn", "ntk", "pi")}
    spread = [max(at[e, 400, s] for e in names) / min(at[e, 400, s] for e in names) for s in seeds]
    numbers = (
        "perplexity at L' = 1024 after 0 / 25 / 400 steps, mean over seeds "
        + ", ".join(map(str, seeds))
        + " [interval over the seeds]: "
        + "; ".join(f"{name} " + " / ".join(over(e, k) for k in steps) for e, name in names.items())
        + "; at 0 steps over RoPE's, seed by seed [interval over the seeds]: "
        + "; ".join(f"{names[e]} {ratios(values)}" for e, values in start.items())
        + f"; after 400 steps the largest over the smallest of the four: {ratios(spread)}"
    )
    below = 1 / (1 + PPL_MARGIN)
    checks = {
        "three seeds": len(seeds) == 3,
        "YaRN starts below RoPE over the seeds": below_over(start["yarn"], below),
        "NTK starts below RoPE over the seeds": below_over(start["ntk"], below),
        "PI starts above RoPE over the seeds": at_least_over(start["pi"], 1 + PPL_MARGIN),
        "all four within 5% after 400 steps over the seeds": below_over(spread, 1.05),
    }
    return outcome(checks, numbers)


def finetune_modes_across_seeds() -> Outcome:
    """PoSE, LongCE and DroPE beside YaRN's full fine-tune at L' = 4L, seeds as the unit: each seed's perplexity
    at L' after 400 steps over the full fine-tune's on the same seed (the same RoPE model, the same documents),
    decided on the 95% interval of those ratios over the seeds: within 5% either way for PoSE and LongCE, above
    the 10% margin for DroPE."""
    folder = "finetune-seeds"
    modes = {"yarn+pose": "YaRN by PoSE", "yarn+longce": "YaRN with LongCE", "drope": "DroPE"}
    rows = shared.table(folder)
    seeds = sorted(set.intersection(*({int(s) for s in rows[rows["encoding"] == f"{m}+ft400"]["seed"]} for m in modes)))
    full = {s: ppl_of_seed(folder, "yarn+ft400", 1024, s) for s in seeds}
    over = {m: [ppl_of_seed(folder, f"{m}+ft400", 1024, s) / full[s] for s in seeds] for m in modes}
    numbers = (
        f"perplexity at L' = 1024 after 400 steps over YaRN's full fine-tune's, seeds {', '.join(map(str, seeds))} "
        "[interval over the seeds]: " + "; ".join(f"{name} {ratios(over[m])}" for m, name in modes.items())
    )

    def within(values: list[float], share: float) -> bool:
        return at_least_over(values, 1 / (1 + share)) and below_over(values, 1 + share)

    checks = {
        "three seeds": len(seeds) == 3,
        "PoSE within 5% of the full fine-tune over the seeds": within(over["yarn+pose"], 0.05),
        "LongCE within 5% of the full fine-tune over the seeds": within(over["yarn+longce"], 0.05),
        "DroPE above it beyond the margin over the seeds": at_least_over(over["drope"], 1 + PPL_MARGIN),
    }
    return outcome(checks, numbers)


def sinks() -> Outcome:
    """StreamingLLM and LM-Infinite: flat perplexity in every seed, and a passkey found only where they attend past
    L: the recent window (depth 1), and for LM-Infinite its global first tokens (depth 0), which StreamingLLM's
    four sinks are too few to hold; never in the middle of the context (depths 0.25, 0.5 and 0.75), each depth of
    each seed whose RoPE model retrieves at L a cell of its own."""
    folder, methods = "showcase-training-free", (("streaming-llm", "StreamingLLM"), ("lm-infinite", "LM-Infinite"))
    # the validity rule: cells past L count only for the seeds whose RoPE model retrieves at L
    rows = shared.table(folder)
    every = sorted(int(s) for s in rows[rows["encoding"] == "rope"]["seed"].unique())  # seeds with their RoPE in
    learned = [s for s in every if retrieves(seed_cell(folder, "rope", 256, s))]
    parts, checks = [], {"a RoPE model retrieves at L": bool(learned)}
    middle = (0.25, 0.5, 0.75)
    for encoding, name in methods:
        rises = seed_rises(folder, encoding, every)
        cells = {s: depth_cells(folder, encoding, 2048, s) for s in learned}
        per_seed = "; ".join(f"seed {s} {by_depth(cells[s])}" for s in learned)
        parts.append(f"{name} perplexity {ratios(rises)}, greedy at depths 0 / 0.25 / 0.5 / 0.75 / 1: {per_seed}")
        checks |= {f"{name} flat over the seeds": flat_over(rises)}
        for s in learned:
            checks |= {
                f"{name} holds in the window, seed {s}": held(cells[s][1.0]),
                f"{name} lost at every middle depth, seed {s}": all(lost(cells[s][d]) for d in middle),
                f"{name} at depth 0 as its first tokens say, seed {s}": (
                    held(cells[s][0.0]) if encoding == "lm-infinite" else lost(cells[s][0.0])
                ),
            }
    out = [str(s) for s in every if s not in learned]
    left = f"; seed {', '.join(out)} left out: its RoPE model does not retrieve at L" if out else ""
    n = depth_cells(folder, "lm-infinite", 2048, learned[0])[1.0].n if learned else 0
    numbers = (
        f"at 8L against L, perplexity seeds {', '.join(map(str, every))}: {'; '.join(parts)} (n = {n} a depth and "
        f"seed{left})"
    )
    return outcome(checks, numbers)


def dual_chunk() -> Outcome:
    """Dual chunk attention keeps both axes where the sinks keep one: flat perplexity, and the passkey held at each
    depth at 8L, on every seed whose RoPE model retrieves at L (the validity rule), where RoPE loses it."""
    folder = "showcase-training-free"
    rows = shared.table(folder)
    every = sorted(int(s) for s in rows[rows["encoding"] == "rope"]["seed"].unique())
    learned = [s for s in every if retrieves(seed_cell(folder, "rope", 256, s))]
    rises = seed_rises(folder, "dual-chunk", every)
    cells = {s: depth_cells(folder, "dual-chunk", 2048, s) for s in learned}
    rope = {s: seed_cell(folder, "rope", 2048, s) for s in learned}
    out = [str(s) for s in every if s not in learned]
    left = f"; seed {', '.join(out)} left out: its RoPE model does not retrieve at L" if out else ""
    numbers = (
        f"at 8L: perplexity {ratios(rises)} its value at L (seeds {', '.join(map(str, every))}); greedy at depths 0 "
        "/ 0.25 / 0.5 / 0.75 / 1: "
        + "; ".join(f"seed {s} {by_depth(cells[s])}" for s in learned)
        + "; RoPE's over every depth "
        + " / ".join(str(rope[s]) for s in learned)
        + f" (seeds {', '.join(map(str, learned))}; n = {next(iter(cells[learned[0]].values())).n} a depth, "
        f"{rope[learned[0]].n} over the depths{left})"
        if learned
        else "no RoPE model retrieves at L"
    )
    checks = {
        "a RoPE model retrieves at L": bool(learned),
        "flat over the seeds": flat_over(rises),
        **{f"held at depth {d:g}, seed {s}": held(c) for s in learned for d, c in cells[s].items()},
        "RoPE lost there": all(lost(c) for c in rope.values()),
    }
    return outcome(checks, numbers)


def string_logn() -> Outcome:
    """STRING and log-n scaling on the showcase RoPE models: neither extends them. Perplexity degrades past L as
    RoPE's does, and retrieval held at L is lost by 8L on every seed whose RoPE model retrieves at L."""
    folder = "showcase-training-free"
    rows = shared.table(folder)
    # stated of STRING without its attention factor: that variant's label where a folder holds both
    string = STRING_AS_STATED if (rows["encoding"] == STRING_AS_STATED).any() else "string"
    methods = ((string, "STRING"), ("logn", "log-n"), ("rope", "RoPE"))
    every = sorted(int(s) for s in rows[rows["encoding"] == "rope"]["seed"].unique())
    learned = [s for s in every if retrieves(seed_cell(folder, "rope", 256, s))]
    if not learned:
        return Outcome(False, "no RoPE model retrieves at L", "a RoPE model retrieves at L")
    parts, checks = [], {}
    for encoding, name in methods:
        rises = seed_rises(folder, encoding, every)
        at_l = [seed_cell(folder, encoding, 256, s) for s in learned]
        far = [seed_cell(folder, encoding, 2048, s) for s in learned]
        parts.append(f"{name} perplexity {ratios(rises)}, greedy {' / '.join(map(str, far))}")
        checks |= {f"{name} degrades over the seeds": at_least_over(rises, DEGRADES)}
        checks |= {f"{name} holds retrieval at L, seed {s}": held(c) for s, c in zip(learned, at_l)}
        checks |= {f"{name} lost at 8L, seed {s}": lost(c) for s, c in zip(learned, far)}
    out = [str(s) for s in every if s not in learned]
    left = f"; seed {', '.join(out)} left out: its RoPE model does not retrieve at L" if out else ""
    numbers = (
        f"at 8L against L (perplexity: seeds {', '.join(map(str, every))}; greedy: seeds "
        f"{', '.join(map(str, learned))}, each retrieving at L): {'; '.join(parts)} "
        f"(n = {far[0].n} a seed{left})"
    )
    return outcome(checks, numbers)
