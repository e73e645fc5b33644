"""Errors that more than one layer raises: ``SerializationError`` comes from ``load``
(serialize.py) and from unpickling a stitched module whose library ops cannot be registered
(partitioning/stitch.py)."""


class SerializationError(RuntimeError):
    """A file ``load`` cannot turn into the program that was saved: the message names the
    file, what is wrong with it and what would be accepted."""
