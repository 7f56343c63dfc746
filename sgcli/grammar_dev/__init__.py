"""Grammar development without a model: dry-run matcher walks, grammar test files, conversion."""
