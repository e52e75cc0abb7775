"""The error every checkpoint reader raises, in a module of its own so that the checks
(``finite``, ``loading``) can share it without importing each other."""


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read, or does not fit the backbone."""
