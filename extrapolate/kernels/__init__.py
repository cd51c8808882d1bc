"""Attention kernels and the one plan that picks among them (`attention.attention_plan`): fused SDPA
and its cache continuations, the CPU fused bias kernels (`flash` helpers with log-sum-exp), flex_attention for
every bias and two-part encoding (`flex`), the two-part rotary kernels (`two_part`), the blocked and
reference kernels, and bf16 linear layers on float32 kernels (`linear`). May import `encodings` (the hooks
an encoding exposes) and `core`. A new kernel goes here, with its case in `attention_plan`."""
