"""Benchmarks run by hand: ``python -m bench`` prints ratios against PyTorch's SDPA.

They are not tests: they never run under pytest and never assert wall-clock times.
"""
