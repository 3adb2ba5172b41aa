"""Where the assistant's hands work: the per-chat workspace, its one path checker and the bubblewrap sandbox."""
