"""`extrapolate reproduce`: re-run a reference suite and compare it with the committed table, with
tolerances from the measured seed spread, and check the qualitative claims the suite exists to show. May import
`run` and below."""

from extrapolate.reproduce.compare import Comparison, Rule, check_claims, claims_over_seeds, compare
from extrapolate.reproduce.job import Outcome, reference_folder, reproduce, reproduce_job, run_suite, update
from extrapolate.reproduce.quantities import measure_spread, quantities, read_spread
from extrapolate.reproduce.suite import Claim, Suite, load_suite

__all__ = [
    "Claim",
    "Comparison",
    "Outcome",
    "Rule",
    "Suite",
    "check_claims",
    "claims_over_seeds",
    "compare",
    "load_suite",
    "measure_spread",
    "quantities",
    "read_spread",
    "reference_folder",
    "reproduce",
    "reproduce_job",
    "run_suite",
    "update",
]
