"""``dw export``: a dw checkpoint as a Hugging Face folder (config.json, model.safetensors, tokenizer)."""
