"""The owner's console: commands answered from the process's own state, the pause, and who may come in."""
