"""Fetching public web pages: the address policy, the pinned fetcher and readable-text extraction."""
