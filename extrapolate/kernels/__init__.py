"""Attention kernels and the one plan that picks among them (`attention`: the `AttentionPlan` values, decided
by `attention_plan` alone and run through the `KERNEL_FUNCTIONS` table): fused SDPA and its cache
continuations, the CPU fused bias kernels (`flash`: the flash op with its log-sum-exp), flex_attention for every
bias and two-part encoding (`flex`), the two-part rotary kernels (`two_part`), the blocked and reference
kernels, grouped-query key heads expanded for kernels without a grouped-query path (`heads`), and bf16 linear
layers on float32 kernels (`linear`). May import `encodings` (the hooks an encoding exposes) and `core`. A new
kernel goes here: an `AttentionPlan`, its case in `attention_plan` and its entry in `KERNEL_FUNCTIONS`."""
