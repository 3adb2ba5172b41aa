-- A text sent in parts that stopped part-way (Telegram asked us to wait between two parts): the ids of the parts
-- already delivered (JSON list), so the next attempt sends only the rest. NULL: nothing delivered yet.
ALTER TABLE outbox ADD COLUMN parts_sent TEXT;
