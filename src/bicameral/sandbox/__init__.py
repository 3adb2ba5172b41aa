"""Running programs for tools: bounded, killable, never through a shell."""
