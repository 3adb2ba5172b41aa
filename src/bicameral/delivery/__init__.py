"""How answers leave: one attempt to a chat's channel, the durable outbox, a long turn's progress note."""
