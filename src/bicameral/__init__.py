"""bicameral: a two-chamber personal assistant for chat."""
