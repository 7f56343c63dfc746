"""The generation core: the only package that imports torch."""
