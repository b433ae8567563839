"""The model layer's names that the command line checks before anything heavy loads: the backends, the Hugging
Face dtypes, the hf: prefix.

`specdec --help` and a usage error found in the arguments themselves must not wait for torch (seconds on a
slow machine), so the parser reads these from here, and their owners (`backends`, `hf`, `train`) build on them:
each name is written once.
"""

BACKEND_NAMES: tuple[str, ...] = ("eager", "fused", "numpy", "onnx")  # `backends.KNOWN`, in its order
DTYPE_NAMES: tuple[str, ...] = ("float32", "float16", "bfloat16")  # the keys of `hf.DTYPES`
HF_PREFIX = "hf:"  # a target or draft spec naming a transformers model: hf:FOLDER or hf:MODEL-ID (cached)
