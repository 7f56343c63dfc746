"""Constraints: what the user asked for (`spec`), where it came from (`sources`), JSON pointers
located in schema text (`jsonpos`) and the structural-tag shapes (`structural_tag`)."""
