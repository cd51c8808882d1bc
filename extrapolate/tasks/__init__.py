"""Evaluation tasks: each turns (model, documents or prompts, length) into measurements — perplexity
(`perplexity`), retrieval (`passkey`, its token-exact prompts in `prompt`, its resumable depth logs in
`depth_log`) — and the declarative task files behind them (`files`). A new task is a TOML file under the
repository's tasks/ and, for a new kind, one builder here. May import `data` and below."""
