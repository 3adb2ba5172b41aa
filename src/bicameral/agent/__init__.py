"""The agent loop and what it needs: runner, breakers, failure sentences, task briefs, session hygiene."""
