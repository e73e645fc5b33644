"""The reference executor: runs a network snapshot layer by layer with torch ops."""
