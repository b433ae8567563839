"""The target: the shipped GPT (config, KV cache, forward at explicit positions), its corpus and vocabulary,
quantization, training and checkpoints, and the backends that run the same weights faster."""
