"""The embedded default models: prepared locally, cached, and loadable by transformers and vLLM.

    from workbench import embedded_models
    embedded_models.prepare("tiny")          # -> Path to a Qwen2 HF directory (random weights, seconds)
    embedded_models.prepare("smollm2")       # -> Path to SmolLM2-135M-Instruct, bf16 (one download)
    embedded_models.resolve_model("/my/ckpt")  # any HF directory works the same way
    embedded_models.generate(GenerationRequest(model="tiny", prompt="Hello"))

Both live under `workbench.settings.cache_dir() / "models"`; deleting that folder is always safe.
The tokenizer training text for `tiny` ships in `corpus/` beside this file.
"""
