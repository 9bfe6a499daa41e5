"""Command modules of the ``pairwise`` CLI; each exposes ``register(root, groups)``."""
