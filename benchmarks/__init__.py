"""Scripts that print figures (timings, memory, accuracy); run each as `python -m benchmarks.NAME` from the checkout."""
