"""The measurement side of dnsstudy: everything that runs things."""

__version__ = "0.1.0"
