"""Real datasets shipped with pairwise (see SOURCES.md for origin and licence)."""
