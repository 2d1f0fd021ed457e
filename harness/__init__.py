"""The measurement side of dnsstudy: everything that runs things."""

#: The project's version, in this one place: pyproject.toml reads it from here when the package is built.
__version__ = "0.1.0"
