"""The findings on the 2025 methods trained in (`results/showcase-seeds-v2`, beside RoPE's three seeds there):
each read only once its three seeds are in, seeds as the unit, cells past L only on the seeds that retrieve at L
(the validity rule)."""

from __future__ import annotations

from extrapolate.reproduce.findings.cells import (
    PPL_MARGIN,
    AcrossSeeds,
    Outcome,
    at_least_over,
    below_over,
    flat_over,
    held,
    lost,
    outcome,
    ratios,
)

FOLDER = "showcase-seeds-v2"


def rises_less_than_rope_and_holds(encoding: str, label: str) -> Outcome:
    """`encoding` at three seeds against RoPE on the same seed: its perplexity rises past L beyond the flat
    margin but less than RoPE's (each seed's rise over RoPE's, below 1 over the seeds); and on every seed that
    retrieves at L it still holds the passkey at 8L, where RoPE loses it on each of its seeds that retrieve
    at L."""
    method, rope = AcrossSeeds.of(encoding, FOLDER), AcrossSeeds.of("rope", FOLDER)
    against = [method.rise[s] / rope.rise[s] for s in method.seeds]
    numbers = (
        f"{label} {method.numbers()}; RoPE's perplexity at 8L / at L on the same seeds "
        + ratios(rope.rise[s] for s in method.seeds)
        + f", {label}'s rise over RoPE's "
        + ratios(against)
        + "; RoPE greedy at 8L on its seeds retrieving at L: "
        + " / ".join(str(rope.at_8l[s]) for s in rope.learned)
    )
    checks = {
        "three seeds": len(method.seeds) == 3,
        f"{label} rises beyond the flat margin over the seeds": len(against) > 1
        and at_least_over(method.rise.values(), 1 + PPL_MARGIN),
        "and less than RoPE on the same seed, over the seeds": len(against) > 1 and below_over(against, 1.0),
        f"{label} retrieves at L in some seed": bool(method.learned),
        f"{label} holds retrieval at 8L on every seed retrieving at L": all(
            held(method.at_8l[s]) for s in method.learned
        ),
        "RoPE loses it at 8L on every seed retrieving at L": all(lost(rope.at_8l[s]) for s in rope.learned),
    }
    return outcome(checks, numbers)


def fope_across_seeds() -> Outcome:
    """FoPE at three seeds: its perplexity rises past L, less than RoPE's on the same seed, and it holds the
    passkey at 8L where RoPE loses it (`rises_less_than_rope_and_holds`)."""
    return rises_less_than_rope_and_holds("fope", "FoPE")


def swa_nope_across_seeds() -> Outcome:
    """The SWA/NoPE hybrid (RoPE layers under a sliding window of L/2, a full NoPE layer every fourth) at three
    seeds: perplexity flat to 8L over the seeds; retrieval at L learned in two seeds of three, and on each seed
    that learns it, lost by 8L."""
    hybrid = AcrossSeeds.of("swa-rope-nope", FOLDER)
    checks = {
        "three seeds": len(hybrid.seeds) == 3,
        "flat over the seeds": len(hybrid.seeds) > 1 and flat_over(hybrid.rise.values()),
        "retrieval at L in two seeds of three": len(hybrid.learned) == 2,
        "lost by 8L on every seed retrieving at L": all(lost(hybrid.at_8l[s]) for s in hybrid.learned),
    }
    return outcome(checks, f"the SWA/NoPE hybrid {hybrid.numbers()}")


def dape_across_seeds() -> Outcome:
    """DAPE (KERPLE's log bias with an MLP over each logit's score and bias) at three seeds: perplexity flat to
    8L over the seeds; retrieval at L learned in two seeds of three, and on each seed that learns it, more of it
    kept at 8L than RoPE keeps on the same seed (the intervals apart; RoPE retrieving at L on those seeds too)."""
    dape, rope = AcrossSeeds.of("dape", FOLDER), AcrossSeeds.of("rope", FOLDER)
    numbers = f"DAPE {dape.numbers()}; RoPE greedy at 8L on the same seeds: " + " / ".join(
        str(rope.at_8l[s]) for s in dape.learned
    )
    checks = {
        "three seeds": len(dape.seeds) == 3,
        "flat over the seeds": len(dape.seeds) > 1 and flat_over(dape.rise.values()),
        "retrieval at L in two seeds of three": len(dape.learned) == 2,
        "RoPE retrieves at L on those seeds": all(s in rope.learned for s in dape.learned),
        "above RoPE at 8L on every seed retrieving at L": all(
            dape.at_8l[s].low > rope.at_8l[s].high for s in dape.learned
        ),
    }
    return outcome(checks, numbers)


def stick_breaking_across_seeds() -> Outcome:
    """Stick-breaking attention (no position encoding: each weight σ(z_ij)·Π(1 − σ(z_ik)) over the keys between)
    at three seeds: perplexity flat to 8L over the seeds; retrieval at L learned in one seed of three, and on
    each seed that learns it, held at every length from 2L to 8L."""
    sticks = AcrossSeeds.of("stick-breaking", FOLDER)
    checks = {
        "three seeds": len(sticks.seeds) == 3,
        "flat over the seeds": len(sticks.seeds) > 1 and flat_over(sticks.rise.values()),
        "retrieval at L in one seed of three": len(sticks.learned) == 1,
        "held from 2L to 8L on every seed retrieving at L": all(sticks.held_past_l(s) for s in sticks.learned),
    }
    return outcome(checks, f"stick-breaking attention {sticks.numbers()}")


def cope_across_seeds() -> Outcome:
    """CoPE (positions counted by sigmoid gates on the context, each head's count interpolated between learned
    position embeddings) at three seeds: its perplexity rises past L, less than RoPE's on the same seed, and it
    holds the passkey at 8L where RoPE loses it (`rises_less_than_rope_and_holds`)."""
    return rises_less_than_rope_and_holds("cope", "CoPE")
