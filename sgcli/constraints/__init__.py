"""Constraints: what the user asked for (spec), where it came from (sources), and the
independent check of an output against it (validate)."""
