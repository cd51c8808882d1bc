"""Training a model here: one step and the whole run with checkpoints, resume and retrieval probes
(`train`), fine-tuning at a longer length (`finetune`), and the atomic checkpoint format (`checkpoint`).
May import `tasks` and below."""
