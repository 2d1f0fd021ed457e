"""`python -m harness.cli`: the same as `dnsstudy`."""

from harness.cli import main

main()
