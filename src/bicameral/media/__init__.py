"""Reading what people send: documents to text, voice to words, once per file, before the turn that answers it."""
