"""Passkey retrieval: task files, token-exact prompts, scoring."""
