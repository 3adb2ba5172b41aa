"""What a model call is shown: inbound envelopes, instructions and memory, compacted transcripts, facts extracted."""
