"""Headless Chromium: one warm browser per process, and what runs in it (KaTeX, the house style)."""
