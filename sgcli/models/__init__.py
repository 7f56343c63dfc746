"""Where a model's files are: model references (hub id, folder, `.gguf`, the embedded default) and
the one hub probe; no torch here, so tokenizers and the CLI can resolve a model cheaply."""
