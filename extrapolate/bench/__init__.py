"""`extrapolate bench`: speed, memory and model FLOP utilisation of the code paths `run` executes
(`measure`), against an equivalent transformers model, and the job that runs and records them (`job`).
May import `run` and below."""
