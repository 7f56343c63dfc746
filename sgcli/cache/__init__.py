"""What sgcli keeps on disk because it is expensive to recompute: converted models, compiled grammars."""
