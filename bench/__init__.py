"""Benchmarks of the assistant against the fake Telegram and model servers; run `python -m bench`."""
