"""Evaluation tasks: each turns (model, documents or prompts, length) into long-format result rows."""
