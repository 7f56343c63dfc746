"""sgcli: structured generation and grammar development for language models."""

__version__ = "0.1.0"

# Version of the JSON record format (see sgcli/records/); bump when a key is renamed or removed.
RECORD_SCHEMA_VERSION = "2"  # 2: timings in milliseconds (*_ms keys)
