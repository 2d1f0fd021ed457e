"""The reading side: results store -> figures, tables and statistics.

Reads only the results store's versioned schema; never imports `harness`.
"""
