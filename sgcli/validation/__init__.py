"""The independent check of an output: jsonschema, the lark parser, the regex package, a
structural-tag scanner. Nothing here imports a grammar backend (an import-linter contract)."""
