"""Zoo model definitions, one module per family; each exposes ``ENTRIES``."""
