"""The turn engine every mode shares: per-chat lanes, the turn handed to a chamber, the commands a lane answers."""
