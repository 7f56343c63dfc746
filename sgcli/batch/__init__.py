"""A run's requests and records: JSONL requests in (`requests`), one record writer out (`records`,
`output`), shared by the local engine and the serving path so both write the same records."""
