"""What models read: corpora (built-in, local files, hub datasets), tokenizers (BPE, bytes, a pretrained
model's own), pinned registry downloads (`fetch`), pretrained checkpoints loaded into the project's model
(`pretrained`), and the deterministic training batches (`batches`). May import `model`, `kernels`,
`encodings` and `core`."""
