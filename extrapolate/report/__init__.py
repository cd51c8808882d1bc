"""The results and what is drawn from them: the long results table (`table`, provenance and seed
aggregation), the training log of probes (`training_log`), the report pages (`pages`, `retrieval` with its
validity rule, `finetune`), the figures (`plots`; `panels`: their small multiples by family), the statistics
(`stats`), and the folder's tables checked together (`folder`). Pure functions of the tables and run records:
nothing recomputed. A new figure or table goes here. May import `training` and below."""
