"""The conversation machinery every mode shares: lanes, turns, envelopes, the router."""
