"""Observability: the tagged transcript, JSON logs and session traces."""
