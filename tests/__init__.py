"""The test suite.

A regular package: the tranco wheel installs a top-level `tests` package that would shadow a namespace one.
"""
