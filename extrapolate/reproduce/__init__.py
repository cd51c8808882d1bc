"""`extrapolate reproduce`: re-run a reference suite and compare it with the committed table, with
tolerances from the measured seed spread, and check the qualitative claims the suite exists to show."""

from .compare import Comparison, Rule, check_claims, claims_over_seeds, compare
from .job import Outcome, reference_folder, reproduce, reproduce_job, run_suite, update
from .quantities import measure_spread, quantities, read_spread
from .suite import Claim, Suite, load_suite

__all__ = ["Claim", "Comparison", "Outcome", "Rule", "Suite", "check_claims", "claims_over_seeds", "compare",
           "load_suite", "measure_spread", "quantities", "read_spread", "reference_folder", "reproduce", "reproduce_job",
           "run_suite", "update"]
