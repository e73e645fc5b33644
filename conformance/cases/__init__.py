"""Case tables, one module per op family; each module exports ``CASES``."""
