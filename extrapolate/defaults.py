"""Defaults shared by the command line and the library (no heavy imports: the CLI reads them at start-up)."""

# Half of the training rows are retrieval prompts and training runs 1200 steps: the budget in which the
# one-token-key task forms at L for the encodings of the default sweep (results/showcase/NOTES.md).
DEFAULT_PASSKEY_FRACTION = 0.5
DEFAULT_STEPS = 1200
# Models trained here learn a one-token key in budget; an ordered 5-digit copy needs an induction circuit
# that small models do not form in a few million tokens (results/showcase/NOTES.md). Pretrained models take
# the classic task.
DEFAULT_RETRIEVAL_TASK = {"trained": "passkey-word", "pretrained": "passkey"}
