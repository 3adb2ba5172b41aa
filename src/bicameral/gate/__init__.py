"""The gate: what an inbound passes before anything thinks about it."""
